import { randomUUID } from 'node:crypto';
import type { DirectoryEntry } from '../bus/directory.js';
import { sendFaultOrder } from '../bus/fault-order-channel.js';
import type { BusTransport } from '../client/bus-transport.js';
import { GATEWAY_SENDER, interruptMessage, nextTaskMessage, taskMessage, type PersonAnswer } from '../client/messages.js';
import { ConfigError, NotFoundError } from '../protocol/errors.js';
import type { ApprovalMode, TurnRequest, TurnSettings } from '../protocol/events.js';
import { FAULT_NOW } from '../protocol/fault-points.js';
import { RPC_ERRORS, type RpcParams } from '../protocol/gateway.js';
import { newId } from '../protocol/ids.js';
import type { InboxMessage } from '../protocol/inbox.js';
import { stricterMode } from '../protocol/turn-settings.js';
import { approvalById, pendingApprovals, type Projection } from '../store/projection.js';
import type { GatewayCommands } from './gateway-ports.js';
import { noHostError, RpcError } from './rpc.js';

// The gateway's commands (`actorloop serve`): each is the inbox message the CLI command of the
// same name sends, built by the client's one message module and sent through the bus transport on
// the person channel, checked against the log as the CLI checks it; or, for `fault.kill`, a fault
// order to the host holding the actor's lease (over the bus, so the host may run on any machine,
// and kills itself only with its own --allow-faults). The gateway hosts nothing: work goes to a
// live `actorloop host`, as `run` hands it over.


/**
 * What the write side needs of the runtime it serves, given by whoever opened it (`serve`): the
 * bus transport it sends with (as `client:gateway`, handing an agent nobody holds to a live host
 * first), the directory and the logs, and the checks a CLI command makes of a turn's settings.
 */
export interface GatewayRuntime {
  /** The bus transport, sending as `client:gateway`. */
  transport: BusTransport;
  /** An agent's directory entry; NotFoundError when there is none. */
  entryOf(agentId: string): Promise<DirectoryEntry>;
  /** The newest root agent of a workspace (`run --last`); NotFoundError when there is none. */
  latestAgent(workspace: string): Promise<DirectoryEntry>;
  /** An agent's log folded. */
  foldLog(entry: DirectoryEntry): Promise<Projection>;
  /** How many `actorloop host` processes are live. */
  liveHosts(): Promise<number>;
  /** Puts a new agent in the directory and hands its first message to the live hosts. */
  submitToHosts(entry: Omit<DirectoryEntry, 'createdAt' | 'updatedAt' | 'status'>, msg: InboxMessage): Promise<void>;
  /** A new agent's first turn as `run` makes it of the call's settings (checked as `run` checks them). */
  firstTurn(p: RpcParams<'turn.submit'>): Promise<TurnRequest>;
  /** The next turn as `run --continue` makes it: the last turn's settings, what the call says over them. */
  nextTurn(p: RpcParams<'turn.submit'>, last: TurnSettings): Promise<TurnRequest>;
  /** The call's answer, refused when it does not fit the question the log holds (as `answer` refuses it). */
  answerOf(p: RpcParams<'ask.answer'>, proj: Projection): PersonAnswer;
  /** The title of a new agent: its task redacted and cut. */
  titleOf(task: string): string;
  /** The host holding an agent's lease now, or null. */
  holder(actorId: string): Promise<string | null>;
  /** Sends fault orders (the bus's core connection). */
  faultOrders: Parameters<typeof sendFaultOrder>[0];
  /** The config's approval mode: a client may not loosen it unless the gateway allows it. */
  approvalMode: ApprovalMode;
}

/** Whether a `turn.submit` says any setting of the turn beyond its task. */
function carriesSettings(p: RpcParams<'turn.submit'>): boolean {
  return Object.keys(p).some((k) => !['task', 'agentId', 'last', 'cwd'].includes(k));
}

/** How far a gateway lets its clients go. */
export interface GatewayCommandOptions {
  /** `serve --allow-looser-policy`: a `turn.submit` may ask for a looser run mode than the config's. */
  allowLooserPolicy: boolean;
}

/**
 * Refuses a `turn.submit` that asks for a looser policy than the gateway owner's config: a
 * client speaks for the owner, not over the owner's config. The run mode is the one such
 * setting the call carries (no policy rules, sandbox or model endpoint travel in it; budgets and
 * tools only narrow what the config allows).
 */
function checkNotLooser(p: RpcParams<'turn.submit'>, approvalMode: ApprovalMode, o: GatewayCommandOptions): void {
  if (o.allowLooserPolicy || p.approve === undefined) return;
  if (stricterMode(p.approve, approvalMode) === p.approve) return;
  throw new ConfigError('gateway.looser_policy', `approve "${p.approve}" is looser than this gateway's approval_mode "${approvalMode}"`, {
    hint: 'leave approve out, or start the gateway with `actorloop serve --allow-looser-policy` to let clients loosen it',
  });
}

/** The gateway's commands over a runtime. */
export function gatewayCommands(rt: GatewayRuntime, o: GatewayCommandOptions = { allowLooserPolicy: false }): GatewayCommands {
  const { transport } = rt;
  const messageId = (id: string): { messageId: string } => ({ messageId: id });
  return {
    async submit(p) {
      checkNotLooser(p, rt.approvalMode, o);
      if (p.agentId !== undefined || p.last === true) {
        const entry = p.agentId !== undefined ? await rt.entryOf(p.agentId) : await rt.latestAgent(p.cwd ?? '.');
        const proj = await rt.foldLog(entry);
        if (!proj.lastSettings) {
          if (carriesSettings(p)) {
            throw new ConfigError('gateway.no_settings', `${entry.actorId} has run no turn yet, so its next turn has no settings to change`, {
              hint: 'send the task alone (its first turn takes the settings it was started with)',
            });
          }
          const id = await transport.send({ type: 'submit', agentId: entry.actorId, task: p.task });
          return { agentId: entry.actorId, messageId: id, turnId: null };
        }
        const request = await rt.nextTurn(p, proj.lastSettings);
        const id = await transport.publish(nextTaskMessage(entry.actorId, p.task, request, proj.openTurn !== null, GATEWAY_SENDER));
        return { agentId: entry.actorId, messageId: id, turnId: null };
      }
      if ((await rt.liveHosts()) === 0) throw noHostError();
      const request = await rt.firstTurn(p);
      const actorId = newId('agent');
      const message = taskMessage(actorId, p.task, request, GATEWAY_SENDER);
      await rt.submitToHosts({
        actorId, kind: 'agent', parentId: null, rootId: actorId, title: rt.titleOf(p.task), workspace: request.workspace, labels: {},
      }, message);
      // the turn's ID is the host's to make when it takes the message: the log's turn/start names it
      return { agentId: actorId, messageId: message.id, turnId: null };
    },
    async send(p) {
      return messageId(await transport.send({ type: p.kind, agentId: p.agentId, text: p.content }));
    },
    async respondApproval(p) {
      const proj = await rt.foldLog(await rt.entryOf(p.agentId));
      const approval = approvalById(proj, p.approvalId);
      if (!approval) {
        const pending = pendingApprovals(proj).map((a) => a.approvalId);
        throw new NotFoundError('gateway.approval_not_found', `${p.agentId} has no approval ${p.approvalId}`, {
          hint: pending.length > 0 ? `pending approvals: ${pending.join(', ')}` : 'it waits for no approval',
        });
      }
      if (approval.state !== 'pending') {
        throw new ConfigError('gateway.approval_answered', `approval ${p.approvalId} is already ${approval.state}`, { hint: 'an approval is answered once' });
      }
      if (p.planDigest !== undefined && p.planDigest !== approval.planDigest) {
        // the person saw another plan than the one the approval binds: their answer is not to this one
        throw new ConfigError('gateway.plan_changed', `approval ${p.approvalId} binds plan ${approval.planDigest}, not the ${p.planDigest} you were shown`, {
          hint: 'reload the approval and answer what it binds now',
        });
      }
      const { planDigest } = approval;
      return messageId(await transport.send(
        p.decision === 'approve'
          ? { type: 'approve', agentId: p.agentId, approvalId: p.approvalId, planDigest, always: p.always === true }
          : { type: 'deny', agentId: p.agentId, approvalId: p.approvalId, planDigest, ...(p.reason !== undefined ? { reason: p.reason } : {}) },
      ));
    },
    async answer(p) {
      const proj = await rt.foldLog(await rt.entryOf(p.agentId));
      const answer = rt.answerOf(p, proj);
      return messageId(await transport.send({ type: 'answer', agentId: p.agentId, questionId: p.questionId, answer }));
    },
    async interrupt(p) {
      const proj = await rt.foldLog(await rt.entryOf(p.agentId));
      if (!proj.openTurn) throw new ConfigError('gateway.no_open_turn', `${p.agentId} has no open turn: nothing to interrupt`);
      return messageId(await transport.send({ type: 'interrupt', agentId: p.agentId }));
    },
    async compact(p) {
      await rt.entryOf(p.agentId);
      return messageId(await transport.send({ type: 'compact', agentId: p.agentId }));
    },
    async controlGoal(p) {
      const proj = await rt.foldLog(await rt.entryOf(p.agentId));
      const expectedRevision = p.expectedRevision ?? proj.goal?.revision ?? 0;
      return messageId(await transport.send({ type: 'goal', agentId: p.agentId, change: { action: p.action, expectedRevision } }));
    },
    async kill(p) {
      const entry = await rt.entryOf(p.agentId);
      const host = await rt.holder(entry.actorId);
      if (!host) {
        throw new ConfigError('gateway.not_hosted', `no process holds ${p.agentId} now: there is nothing to kill`, {
          hint: 'a fault order goes to the host holding the agent; give it work first (a turn, a message) so a host takes it',
        });
      }
      const point = p.point ?? FAULT_NOW;
      const order = { actorId: entry.actorId, point, ...(p.nth !== undefined ? { nth: p.nth } : {}), orderId: randomUUID() };
      const reply = await sendFaultOrder(rt.faultOrders, host, order);
      if (!reply) {
        // no local-pid fallback: a holder that takes no orders did not agree to be killed
        throw new ConfigError('gateway.not_a_fault_host', `${p.agentId} is held by ${host}, which takes no fault orders (a command hosting it in-process, or a host of an older version)`, {
          hint: 'host the agent on an `actorloop host --allow-faults`',
        });
      }
      if (!reply.armed) {
        const data = { code: reply.code, host: reply.hostId, pid: reply.pid };
        if (reply.code === 'host.faults_disabled') throw new RpcError(RPC_ERRORS.faultsDisabled, reply.message, data);
        throw new ConfigError(reply.code, reply.message);
      }
      return { status: point === FAULT_NOW ? 'killed' : 'armed', hostId: reply.hostId, pid: reply.pid, point };
    },
    async cancelJob(p) {
      // a job's host takes an interrupt on the person channel as its cancel (`user_cancelled`), as an
      // agent's takes one as the end of its turn: the same message the CLI's `job --cancel` sends
      return { messageId: await transport.publish(interruptMessage(p.jobId, GATEWAY_SENDER)), jobId: p.jobId };
    },
  };
}
