import { ActorloopError, ToolError } from '../../protocol/errors.js';
import { derivedId } from '../../protocol/ids.js';
import type { InboxKind, InboxMessage } from '../../protocol/inbox.js';
import { SubagentNoticeSchema, type SubagentNotice } from '../../protocol/subagents.js';
import { runningChildren } from '../../store/subagent-projection.js';
import type { Projection } from '../../store/projection.js';
import type { InterruptAgentInput, ReportInput, SendMessageInput, WaitAgentsInput } from '../../tools/builtins/subagent-tools.js';
import type { BlobStore } from '../../store/blob-port.js';
import type { EffectContext } from '../agent/effect-context.js';
import { armWait, callFailed, callSucceeded, settleWaits } from './child-waits.js';
import type { RuntimeTool, RuntimeToolRun } from '../agent/runtime-tool.js';
import { limitsOf } from './spawn-agent.js';

// What parent and child say to each other (design §6b), always through the recipient's inbox on
// the actors' channel: the runtime names the sender (the running actor) and checks the relation.
// Each message's ID is derived from the call (or the turn) that sends it, so a send retried after
// a crash is deduped by the inbox and by the recipient's log. The ID returned means the
// recipient's inbox accepted it, nothing more.

function message(a: EffectContext, id: string, to: string, kind: InboxKind, content: string, target: InboxMessage['target']): InboxMessage {
  return { id, from: a.actorId, to, kind, target, wakeup: true, content, request: null, sentAt: new Date(a.ports.clock.nowMs()).toISOString() };
}

/** The child a model names, by ID or by its spawn name; why not when it names none of this agent's (or two). */
export function resolveChild(p: Projection, ref: string): { id: string } | { error: string } {
  const mine = p.children ?? {};
  if (mine[ref]) return { id: ref };
  const named = Object.entries(mine).filter(([, c]) => c.name === ref).map(([id]) => id);
  if (named.length === 1) return { id: named[0]! };
  if (named.length > 1) return { error: `${named.length} of your subagents are named "${ref}": name one by its ID (${named.join(', ')})` };
  const list = Object.entries(mine).map(([id, c]) => `${c.name} (${id})`);
  return { error: `"${ref}" is not one of your subagents${list.length > 0 ? ` (yours: ${list.join(', ')})` : ' (you have none)'}` };
}

/** A child of this agent by ID or name, or null after staging the tool error the model sees. */
function ownChild(a: EffectContext, r: RuntimeToolRun, ref: string): string | null {
  const c = resolveChild(a.projection, ref);
  if ('id' in c) return c.id;
  callFailed(a, r, 'subagent.not_child', c.error);
  return null;
}

/** `send_message {agent, content, follow_up?}`: a parent to one of its children. */
export const sendMessageRuntime: RuntimeTool = {
  name: 'send_message',
  async run(a, r) {
    const input = r.input as SendMessageInput;
    if (!a.ports.subagents) return callFailed(a, r, 'subagent.unavailable', 'this runtime hosts no subagents');
    const childId = ownChild(a, r, input.agent);
    if (childId === null) return;
    const id = derivedId('message', 'send', r.ids.call);
    const kind = input.follow_up ? 'follow_up' : 'steer';
    if (input.follow_up) {
      // a follow-up is a turn more: the child holds a place in the tree for it, under the message's ID
      const max = limitsOf(a).maxChildrenPerTree;
      const slot = await a.ports.subagents.takeSlot(a.rootId, childId, id, max);
      if (a.halted) return;
      if (!slot.taken) return callFailed(a, r, 'subagent.tree_width', `the tree already runs ${slot.running} of its ${max} subagents (max_children_per_tree): wait_agents first`);
    }
    const text = `Message from your parent agent (${a.actorId}):\n${input.content}`;
    await a.ports.subagents.send(message(a, id, childId, kind, text, input.follow_up ? 'next_turn' : 'next_step'));
    if (a.halted) return;
    a.stage({ type: 'subagent/message_sent', ...r.ids, data: { childId, messageId: id, kind } });
    callSucceeded(a, r, `Sent ${id} to ${childId}: its inbox accepted it (${input.follow_up ? 'a follow-up: a new turn once its current one ends' : 'read at its next step'}).`);
  },
};

/** `report {content}`: a child to its parent; a top-level agent has nobody to report to. */
export const reportRuntime: RuntimeTool = {
  name: 'report',
  async run(a, r) {
    const input = r.input as ReportInput;
    const link = a.projection.parentLink;
    if (!link) return callFailed(a, r, 'subagent.no_parent', 'report is for subagents, and you have no parent agent (a person started you): put it in your answer');
    if (!a.ports.subagents) return callFailed(a, r, 'subagent.unavailable', 'this runtime hosts no subagents');
    const id = derivedId('message', 'report', r.ids.call);
    const content = JSON.stringify({ childId: a.actorId, name: link.name, content: input.content });
    await a.ports.subagents.send(message(a, id, link.parentId, 'subagent_report', content, 'next_step'));
    if (a.halted) return;
    a.stage({ type: 'subagent/reported', ...r.ids, data: { parentId: link.parentId, messageId: id } });
    callSucceeded(a, r, `Reported to your parent (${link.parentId}) as ${id}.`);
  },
};

/** `interrupt_agent {id}`: stops a child's running turn. */
export const interruptAgentRuntime: RuntimeTool = {
  name: 'interrupt_agent',
  async run(a, r) {
    const input = r.input as InterruptAgentInput;
    if (!a.ports.subagents) return callFailed(a, r, 'subagent.unavailable', 'this runtime hosts no subagents');
    const childId = ownChild(a, r, input.id);
    if (childId === null) return;
    const id = derivedId('message', 'interrupt', r.ids.call);
    await a.ports.subagents.send(message(a, id, childId, 'subagent_interrupt', '', 'now'));
    if (a.halted) return;
    a.stage({ type: 'subagent/message_sent', ...r.ids, data: { childId, messageId: id, kind: 'interrupt' } });
    callSucceeded(a, r, `Asked ${childId} to stop its turn (${id}); its notice says how the turn ended.`);
  },
};

/** `wait_agents {ids?, timeout_seconds}`: parks the call until one of them reports or ends. */
export const waitAgentsRuntime: RuntimeTool = {
  name: 'wait_agents',
  async run(a, r) {
    const input = r.input as WaitAgentsInput;
    if (!a.projection.waits?.[r.ids.call]) {
      const mine = a.projection.children ?? {};
      const named: string[] = [];
      for (const ref of input.ids ?? []) {
        const c = resolveChild(a.projection, ref);
        if ('error' in c) return callFailed(a, r, 'subagent.not_child', c.error);
        named.push(c.id);
      }
      // the running children, and any whose message is still unread (one a step already read is not)
      const running = new Set(runningChildren(a.projection));
      const unread = new Set(Object.entries(mine).filter(([, c]) => c.lastNotice !== undefined && a.projection.inbox[c.lastNotice]?.state === 'pending').map(([id]) => id));
      const asked = input.ids ? [...new Set(named)] : [...new Set([...running, ...unread])];
      const ids = asked.filter((id) => running.has(id) || unread.has(id) || pendingReport(a.projection, id));
      if (ids.length === 0) {
        if (asked.length === 0) return callFailed(a, r, 'subagent.none_running', 'none of your subagents is running, and none has a message waiting: there is nothing to wait for');
        const ended = asked.map((id) => `${mine[id]!.name} (${id}) ${mine[id]!.state}`).join(', ');
        return callSucceeded(a, r, `Nothing to wait for: ${ended}; what they said is already in your messages.`);
      }
      a.stage({ type: 'subagent/waiting', ...r.ids, data: { childIds: ids, deadlineAt: Math.round(a.ports.clock.nowMs() + input.timeout_seconds * 1000), any: true } });
    }
    armWait(a, r.ids);
  },
};

/** The completion notice a child owes its parent for the turn that ended (from its log). */
async function owedNotice(a: EffectContext): Promise<SubagentNotice | null> {
  const owed = a.projection.noticeOwed;
  const link = a.projection.parentLink;
  if (!owed || !link) return null;
  // A lost answer blob does not hold the notice back (the parent waits on it): it carries the
  // preview the log holds, and its reason says why the rest is gone.
  let lost: string | null = null;
  const answer = owed.answerRef
    ? await a.outputs.load(owed.answerRef, 'its answer').catch((err: unknown) => {
      lost = err instanceof ActorloopError ? err.userMessage() : String(err);
      a.logger.warn({ err, turn: owed.turn }, 'the whole answer of the turn is not in the blob store; its notice carries the preview');
      return owed.answer;
    })
    : owed.answer;
  const artifacts: SubagentNotice['artifacts'] = [];
  const ws = a.projection.lastSettings?.workspace;
  let reason = lost === null ? owed.reason : [owed.reason, `the answer is its preview only: ${lost}`].filter((r) => r !== null).join('; ');
  if (a.ports.subagents?.worktreeDiff && ws && link.workspaceMode === 'worktree') {
    const found = await a.ports.subagents.worktreeDiff(ws).catch((err: unknown) => {
      a.logger.warn({ err, worktree: ws }, 'the worktree diff could not be made; the notice goes without it');
      // a refusal (a worktree the child tampered with) is the parent's to know: it gets no diff
      if (err instanceof ToolError) reason = [reason, `its worktree gave no diff: ${err.message}`].filter((r) => r !== null).join('; ');
      return null;
    });
    if (found) {
      // a diff is tool output like any other: secrets in it reach no model, log or blob
      const { text: diff, count } = a.ports.tooling.redactor.redact(found);
      const what = count > 0
        ? `diff of its worktree (apply it with apply_patch; ${count} secret${count === 1 ? ' was' : 's were'} redacted, so the lines holding them will not apply as they are)`
        : 'diff of its worktree (apply it with apply_patch)';
      const digest = await a.ports.blobs.put(diff);
      artifacts.push({ id: derivedId('artifact', 'worktree-diff', a.actorId, owed.turn), digest, bytes: Buffer.byteLength(diff), what, text: diff });
    }
  }
  return SubagentNoticeSchema.parse({
    childId: a.actorId, name: link.name, turn: owed.turn, outcome: owed.outcome, reason, answer,
    artifacts, usage: owed.usage, costUsd: owed.costUsd,
    ...(owed.steps !== undefined ? { steps: owed.steps } : {}), ...(owed.toolCalls !== undefined ? { toolCalls: owed.toolCalls } : {}),
  });
}

/**
 * Sends the completion notice a child owes (after its `turn/end` is committed, or when a host
 * takes on a child that died owing one), then commits `subagent/notified`. The notice's ID is
 * derived from the turn: sent twice, it is one message.
 */
export async function sendOwedNotice(a: EffectContext): Promise<void> {
  const port = a.ports.subagents;
  const link = a.projection.parentLink;
  if (!port || !link || !a.projection.noticeOwed) return;
  const notice = await owedNotice(a);
  if (!notice || a.halted) return;
  // the turn is over: its place in the tree goes back before the notice is marked sent, so a
  // crash in between gives it back again (a release is idempotent) and none is kept forever
  const tokens = a.projection.noticeOwed.messageIds ?? null;
  await port.releaseSlot(a.rootId, a.actorId, tokens).catch((err: unknown) =>
    a.logger.warn({ err }, 'place in the tree not given back; a full tree frees it later'));
  if (a.halted) return;
  const id = derivedId('message', 'notice', a.actorId, notice.turn);
  await port.send(message(a, id, link.parentId, 'subagent_completed', JSON.stringify(notice), 'next_step'));
  if (a.halted || a.projection.noticeOwed?.turn !== notice.turn) return;
  a.stage({ type: 'subagent/notified', data: { parentId: link.parentId, messageId: id, turn: notice.turn, outcome: notice.outcome } });
  a.kick();
}

/**
 * A child's message reached this parent (committed `inbox/received`): a completion notice settles
 * the child's carve of the parent's budget with what the child spent, and every wait it
 * satisfies takes it.
 */
export function onChildMessage(a: EffectContext, messageId: string): void {
  const item = a.projection.inbox[messageId];
  if (!item || item.state !== 'pending') return;
  if (item.kind === 'subagent_completed') {
    const n = SubagentNoticeSchema.safeParse(safeJson(item.content));
    const c = n.success ? a.projection.children?.[n.data.childId] : undefined;
    const rsv = c?.reservationId ? a.projection.reservations?.[c.reservationId] : undefined;
    if (n.success && c?.reservationId && rsv) {
      const spent = n.data.usage.inputTokens + n.data.usage.outputTokens;
      a.stage({
        type: 'budget/settled',
        ...(a.projection.openTurn?.id === rsv.turn ? { turn: rsv.turn } : {}),
        // what the child spent, within its carve (a child never spends past it)
        data: {
          reservationId: c.reservationId, tokens: Math.min(spent, rsv.tokens || spent), costUsd: rsv.costUsd === null ? null : Math.min(n.data.costUsd ?? rsv.costUsd, rsv.costUsd), outcome: 'charged',
          // a notice from before steps and calls were carved says nothing of them: the carve is charged whole
          ...(rsv.calls !== undefined ? { calls: Math.min(n.data.toolCalls ?? rsv.calls, rsv.calls) } : {}),
          ...(rsv.steps !== undefined ? { steps: Math.min(n.data.steps ?? rsv.steps, rsv.steps) } : {}),
        },
      });
    }
  }
  settleWaits(a);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/**
 * The parent's turn ended cancelled or failed: its running children are interrupted
 * (`on_parent_end = "cancel"`) or let go on alone (`"detach"`), each a fact in its log. The
 * interrupt's ID is derived from the turn and the child: a turn ended again after a crash sends
 * the same one.
 */
export async function endChildren(a: EffectContext, outcome: string): Promise<void> {
  const port = a.ports.subagents;
  const turn = a.projection.openTurn?.id;
  if (!port || !turn || (outcome !== 'cancelled' && outcome !== 'failed')) return;
  const reason = `the parent's turn ended ${outcome}`;
  for (const childId of runningChildren(a.projection)) {
    if (port.limits.onParentEnd === 'detach') {
      a.stage({ type: 'subagent/detached', turn, data: { childId, reason } });
      continue;
    }
    const id = derivedId('message', 'parent_end', turn, childId);
    await port.send(message(a, id, childId, 'subagent_interrupt', '', 'now')).catch((err: unknown) =>
      a.logger.warn({ err, childId }, 'interrupt of a subagent not sent; it runs on until its own end'));
    if (a.halted) return;
    a.stage({ type: 'subagent/message_sent', turn, data: { childId, messageId: id, kind: 'interrupt', reason } });
  }
}

/**
 * Stores the artifacts a child's notice carries (a worktree's diff) in this host's blob store, and
 * returns the notice without their text: the parent's log names them by digest.
 */
export async function storeCarriedArtifacts(blobs: BlobStore, kind: string, content: string): Promise<string> {
  if (kind !== 'subagent_completed') return content;
  const n = SubagentNoticeSchema.safeParse(safeJson(content));
  if (!n.success || !n.data.artifacts.some((x) => x.text !== undefined)) return content;
  const artifacts = [];
  for (const { text, ...art } of n.data.artifacts) {
    const digest = text === undefined ? art.digest : await blobs.put(text);
    artifacts.push({ ...art, digest });
  }
  return JSON.stringify({ ...n.data, artifacts });
}

/** A report from this child waits unread. */
function pendingReport(p: Projection, childId: string): boolean {
  return (p.nextStep ?? []).some((id) => {
    const item = p.inbox[id];
    if (item?.kind !== 'subagent_report' || item.state !== 'pending') return false;
    const v = safeJson(item.content) as { childId?: unknown } | null;
    return v?.childId === childId;
  });
}
