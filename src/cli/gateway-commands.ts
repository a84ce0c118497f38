import { randomUUID } from 'node:crypto';
import { ConfigError, NotFoundError } from '../protocol/errors.js';
import { newId } from '../protocol/ids.js';
import type { InboxMessage } from '../protocol/inbox.js';
import { pendingApprovals } from '../store/projection.js';
import type { GatewayCommands } from '../server/gateway.js';
import { noHostError, RpcError } from '../server/rpc.js';
import { RPC_ERRORS } from '../protocol/gateway.js';
import { FAULT_NOW } from '../protocol/fault-points.js';
import { sendFaultOrder } from '../bus/fault-order-channel.js';
import { approvalMessage } from './commands/approvals.js';
import { answerFromArgs, questionToAnswer } from './commands/answer.js';
import { questionAnswerMessage } from './commands/questions.js';
import { validateRun, type RunOptions } from './commands/run.js';
import { entryOf, foldLog, placementOf, releaseToHosts, submitToHosts } from './hand-off.js';
import { lineFor } from './hints.js';
import { interruptMessage } from './interrupt-key.js';
import { sendAsPerson, textMessage } from './person-messages.js';
import type { Runtime } from './runtime.js';

// The gateway's commands (`actorloop serve`): each is the inbox message the CLI command of the
// same name sends, on the person channel, checked against the log as the CLI checks it; or, for
// `fault.kill`, a fault order to the host holding the actor's lease (over the bus, so the host
// may run on any machine, and kills itself only with its own --allow-faults). The gateway hosts
// nothing: work goes to a live `actorloop host`, as `run` hands it over.

/** Who the gateway's messages come from (the inbox door keeps a plain client name). */
export const GATEWAY_SENDER = 'client:gateway';

const fromGateway = (msg: InboxMessage): InboxMessage => ({ ...msg, from: GATEWAY_SENDER });

/** Hands a message for an existing agent to whoever hosts it; a lease nobody holds goes to a live host, none live: an error saying to start one. */
async function deliver(rt: Runtime, agentId: string, msg: InboxMessage): Promise<{ messageId: string }> {
  const entry = await entryOf(rt, agentId);
  const place = await placementOf(rt, agentId);
  if (place.kind === 'free') {
    if (place.hosts.length === 0) throw noHostError();
    await releaseToHosts(rt, entry);
  }
  await sendAsPerson(rt, fromGateway(msg));
  return { messageId: msg.id };
}

/** The gateway's commands over an open runtime. */
export function gatewayCommands(rt: Runtime): GatewayCommands {
  const line = lineFor(rt.config);
  return {
    async submit(p) {
      if (p.agentId !== undefined) {
        const { messageId } = await deliver(rt, p.agentId, textMessage(p.agentId, 'follow_up', p.task));
        return { agentId: p.agentId, messageId, turnId: null };
      }
      if ((await rt.hosts.live(Date.now())).length === 0) throw noHostError();
      const opts: RunOptions = {
        ...(p.model !== undefined ? { model: p.model } : {}),
        ...(p.cwd !== undefined ? { cwd: p.cwd } : {}),
        ...(p.approve !== undefined ? { approve: p.approve } : {}),
        ...(p.maxSteps !== undefined ? { maxSteps: p.maxSteps } : {}),
        ...(p.maxToolCalls !== undefined ? { maxToolCalls: p.maxToolCalls } : {}),
        ...(p.tools !== undefined ? { tools: p.tools } : {}),
        ...(p.planMode ? { planMode: true } : {}),
      };
      const request = await validateRun(p.task, opts, rt.config);
      const actorId = newId('agent');
      const message: InboxMessage = {
        id: newId('message'), from: GATEWAY_SENDER, to: actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
        content: p.task, request, sentAt: new Date().toISOString(),
      };
      await submitToHosts(rt, {
        actorId, kind: 'agent', parentId: null, rootId: actorId, title: p.task.trim().slice(0, 120), workspace: request.workspace, labels: {},
      }, message);
      // the turn's ID is the host's to make when it takes the message: the log's turn/start names it
      return { agentId: actorId, messageId: message.id, turnId: null };
    },
    async send(p) {
      return deliver(rt, p.agentId, textMessage(p.agentId, p.kind, p.content));
    },
    async respondApproval(p) {
      const entry = await entryOf(rt, p.agentId);
      const proj = await foldLog(rt, entry);
      const approval = proj.approvals?.[p.approvalId];
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
      return deliver(rt, p.agentId, approvalMessage(p.agentId, p.approvalId, approval.planDigest, answer));
    },
    async answer(p) {
      const entry = await entryOf(rt, p.agentId);
      const proj = await foldLog(rt, entry);
      const answer = answerFromArgs(p.optionId === undefined ? p.text : undefined, p.optionId === undefined ? {} : { option: p.optionId });
      questionToAnswer(p.agentId, p.questionId, proj, answer, line);
      return deliver(rt, p.agentId, questionAnswerMessage(p.agentId, p.questionId, answer));
    },
    async interrupt(p) {
      const entry = await entryOf(rt, p.agentId);
      const proj = await foldLog(rt, entry);
      if (!proj.openTurn) throw new ConfigError('gateway.no_open_turn', `${p.agentId} has no open turn: nothing to interrupt`);
      return deliver(rt, p.agentId, interruptMessage(p.agentId));
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
