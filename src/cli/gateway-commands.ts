import { randomUUID } from 'node:crypto';
import { ConfigError, NotFoundError } from '../protocol/errors.js';
import { newId } from '../protocol/ids.js';
import type { TurnRequest } from '../protocol/events.js';
import type { RpcParams } from '../protocol/gateway.js';
import type { InboxMessage } from '../protocol/inbox.js';
import { outputValidator } from '../model/output-schema.js';
import { approvalById, pendingApprovals } from '../store/projection.js';
import type { GatewayCommands } from '../server/gateway.js';
import { noHostError, RpcError } from '../server/rpc.js';
import { RPC_ERRORS } from '../protocol/gateway.js';
import { stricterMode } from '../protocol/turn-settings.js';
import { FAULT_NOW } from '../protocol/fault-points.js';
import { sendFaultOrder } from '../bus/fault-order-channel.js';
import { answerFromArgs, questionToAnswer } from './commands/answer.js';
import { continueRequest } from './commands/continue.js';
import { validateRun, type RunOptions } from './commands/run.js';
import { entryOf, foldLog, latestAgent, placementOf, releaseToHosts, submitToHosts } from './hand-off.js';
import { lineFor } from './hints.js';
import { sendAsPerson } from './person-messages.js';
import { approvalMessage, GATEWAY_SENDER, interruptMessage, nextTaskMessage, questionAnswerMessage, taskMessage, textMessage } from '../client/messages.js';
import type { Runtime } from './runtime.js';

// The gateway's commands (`actorloop serve`): each is the inbox message the CLI command of the
// same name sends, on the person channel, checked against the log as the CLI checks it; or, for
// `fault.kill`, a fault order to the host holding the actor's lease (over the bus, so the host
// may run on any machine, and kills itself only with its own --allow-faults). The gateway hosts
// nothing: work goes to a live `actorloop host`, as `run` hands it over.


/** Hands a message for an existing agent to whoever hosts it; a lease nobody holds goes to a live host, none live: an error saying to start one. */
async function deliver(rt: Runtime, agentId: string, msg: InboxMessage): Promise<{ messageId: string }> {
  const entry = await entryOf(rt, agentId);
  const place = await placementOf(rt, agentId);
  if (place.kind === 'free') {
    if (place.hosts.length === 0) throw noHostError();
    await releaseToHosts(rt, entry);
  }
  await sendAsPerson(rt, msg);
  return { messageId: msg.id };
}

/**
 * `run`'s options for a `turn.submit`: the same checks (`validateRun`, `continueRequest`) then
 * apply to a remote run as to a local one. A file the CLI reads (instructions, output schema)
 * comes as its contents: `withGatewaySettings` puts those in.
 */
function runOptionsOf(p: RpcParams<'turn.submit'>): RunOptions {
  const str = (n: number | undefined): string | undefined => (n === undefined ? undefined : String(n));
  const opts: RunOptions = {
    model: p.model, cwd: p.cwd, approve: p.approve, maxSteps: p.maxSteps, maxToolCalls: p.maxToolCalls, tools: p.tools,
    planMode: p.planMode, deadline: p.deadlineSeconds, maxTokens: p.maxTokens, maxCost: p.maxCostUsd, effort: p.effort,
    maxOutputTokens: p.maxOutputTokens, completeWhen: p.completeWhen,
    goal: p.goal?.objective, goalTokens: str(p.goal?.tokens), goalCost: str(p.goal?.costUsd), goalSeconds: str(p.goal?.seconds),
  };
  // an absent key is a flag not given (`settingsOfFlags` tells a given one by its presence)
  for (const k of Object.keys(opts) as (keyof RunOptions)[]) if (opts[k] === undefined) delete opts[k];
  return opts;
}

/** Whether a `turn.submit` says any setting of the turn beyond its task. */
function carriesSettings(p: RpcParams<'turn.submit'>): boolean {
  return Object.keys(p).some((k) => !['task', 'agentId', 'last', 'cwd'].includes(k));
}

/** The request with the instructions and output schema the call carries as text and JSON (checked as `run` checks the files). */
function withGatewaySettings(request: TurnRequest, p: RpcParams<'turn.submit'>): TurnRequest {
  if (p.instructions !== undefined) {
    if (p.instructions.trim() === '') throw new ConfigError('config.instructions', 'the instructions are empty', { hint: 'send the system prompt\'s text, or leave instructions out' });
    request.instructions = p.instructions;
  }
  if (p.outputSchema !== undefined) {
    outputValidator(p.outputSchema);
    request.outputSchema = p.outputSchema;
  }
  return request;
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
function checkNotLooser(p: RpcParams<'turn.submit'>, config: Pick<Runtime['config'], 'approvalMode'>, o: GatewayCommandOptions): void {
  if (o.allowLooserPolicy || p.approve === undefined) return;
  if (stricterMode(p.approve, config.approvalMode) === p.approve) return;
  throw new ConfigError('gateway.looser_policy', `approve "${p.approve}" is looser than this gateway's approval_mode "${config.approvalMode}"`, {
    hint: 'leave approve out, or start the gateway with `actorloop serve --allow-looser-policy` to let clients loosen it',
  });
}

/** The gateway's commands over an open runtime. */
export function gatewayCommands(rt: Runtime, o: GatewayCommandOptions = { allowLooserPolicy: false }): GatewayCommands {
  const line = lineFor(rt.config);
  return {
    async submit(p) {
      checkNotLooser(p, rt.config, o);
      const opts = runOptionsOf(p);
      if (p.agentId !== undefined || p.last === true) {
        const entry = p.agentId !== undefined ? await entryOf(rt, p.agentId) : await latestAgent(rt, p.cwd ?? '.');
        const proj = await foldLog(rt, entry);
        if (!proj.lastSettings) {
          if (carriesSettings(p)) {
            throw new ConfigError('gateway.no_settings', `${entry.actorId} has run no turn yet, so its next turn has no settings to change`, {
              hint: 'send the task alone (its first turn takes the settings it was started with)',
            });
          }
          const { messageId } = await deliver(rt, entry.actorId, textMessage(entry.actorId, 'follow_up', p.task, GATEWAY_SENDER));
          return { agentId: entry.actorId, messageId, turnId: null };
        }
        // the next turn as `run --continue` makes it: the last turn's settings, what this call says over them
        const request = withGatewaySettings(await continueRequest(opts, rt.config, proj.lastSettings), p);
        const msg = nextTaskMessage(entry.actorId, p.task, request, proj.openTurn !== null, GATEWAY_SENDER);
        const { messageId } = await deliver(rt, entry.actorId, msg);
        return { agentId: entry.actorId, messageId, turnId: null };
      }
      if ((await rt.hosts.live(Date.now())).length === 0) throw noHostError();
      const request = withGatewaySettings(await validateRun(p.task, opts, rt.config), p);
      const actorId = newId('agent');
      const message = taskMessage(actorId, p.task, request, GATEWAY_SENDER);
      await submitToHosts(rt, {
        actorId, kind: 'agent', parentId: null, rootId: actorId, title: rt.tooling.redactor.redact(p.task.trim()).text.slice(0, 120), workspace: request.workspace, labels: {},
      }, message);
      // the turn's ID is the host's to make when it takes the message: the log's turn/start names it
      return { agentId: actorId, messageId: message.id, turnId: null };
    },
    async send(p) {
      return deliver(rt, p.agentId, textMessage(p.agentId, p.kind, p.content, GATEWAY_SENDER));
    },
    async respondApproval(p) {
      const entry = await entryOf(rt, p.agentId);
      const proj = await foldLog(rt, entry);
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
      const answer = p.decision === 'approve' ? { decision: 'approve' as const, always: p.always === true } : { decision: 'deny' as const, reason: p.reason ?? null };
      return deliver(rt, p.agentId, approvalMessage(p.agentId, p.approvalId, approval.planDigest, answer, GATEWAY_SENDER));
    },
    async answer(p) {
      const entry = await entryOf(rt, p.agentId);
      const proj = await foldLog(rt, entry);
      const answer = answerFromArgs(p.optionId === undefined ? p.text : undefined, p.optionId === undefined ? {} : { option: p.optionId });
      questionToAnswer(p.agentId, p.questionId, proj, answer, line);
      return deliver(rt, p.agentId, questionAnswerMessage(p.agentId, p.questionId, answer, GATEWAY_SENDER));
    },
    async interrupt(p) {
      const entry = await entryOf(rt, p.agentId);
      const proj = await foldLog(rt, entry);
      if (!proj.openTurn) throw new ConfigError('gateway.no_open_turn', `${p.agentId} has no open turn: nothing to interrupt`);
      return deliver(rt, p.agentId, interruptMessage(p.agentId, GATEWAY_SENDER));
    },
    async kill(p) {
      const entry = await entryOf(rt, p.agentId);
      const lease = await rt.leases.get(entry.actorId, Date.now());
      if (!lease) {
        throw new ConfigError('gateway.not_hosted', `no process holds ${p.agentId} now: there is nothing to kill`, {
          hint: 'a fault order goes to the host holding the agent; give it work first (a turn, a message) so a host takes it',
        });
      }
      const point = p.point ?? FAULT_NOW;
      const order = { actorId: entry.actorId, point, ...(p.nth !== undefined ? { nth: p.nth } : {}), orderId: randomUUID() };
      const reply = await sendFaultOrder(rt.bus.nc, lease.host, order);
      if (!reply) {
        // no local-pid fallback: a holder that takes no orders did not agree to be killed
        throw new ConfigError('gateway.not_a_fault_host', `${p.agentId} is held by ${lease.host}, which takes no fault orders (a command hosting it in-process, or a host of an older version)`, {
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
  };
}
