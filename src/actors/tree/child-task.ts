import type { HistoryItem } from '../../protocol/history.js';
import type { TurnRequest } from '../../protocol/turn-settings.js';
import { ChildTaskSchema, childIdOf, noticeText, NOTICE_KINDS, type ChildTask } from '../../protocol/subagents.js';
import type { InboxItem, Projection } from '../../store/projection.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import { DEFAULT_INSTRUCTIONS } from '../agent/turn-settings.js';

// A child's side of its task (design §6b): the turn its `subagent_task` message starts, with the
// permissions and budget its parent fixed, and what the model reads of messages between them.

/** What a child's instructions say, after its parent's (or the default) instructions. */
export const CHILD_INSTRUCTIONS =
  '\n\nYou are a subagent: another agent (your parent) gave you the task below. Work on it alone with your tools. ' +
  'Your final answer goes to your parent as your result, so make it complete and self-contained. ' +
  'Use report to send your parent a finding before you are done, when it cannot wait.';

/** The most characters of the parent's history a forked child reads. */
export const FORK_TRANSCRIPT_CHARS = 64 * 1024;

/** The task a `subagent_task` message carries; null when its content is not one. */
export function parseChildTask(content: string): ChildTask | null {
  try {
    const t = ChildTaskSchema.safeParse(JSON.parse(content));
    return t.success ? t.data : null;
  } catch {
    return null;
  }
}

/** The turn request of a child's first turn: its parent's model, the permissions and budget recorded at the spawn. */
export function childRequest(task: ChildTask, nowMs: number): TurnRequest {
  const b = task.budget;
  return {
    model: task.model,
    baseUrl: task.baseUrl,
    workspace: task.permissions.workspace,
    tools: task.permissions.tools,
    instructions: (task.instructions ?? DEFAULT_INSTRUCTIONS) + CHILD_INSTRUCTIONS,
    maxSteps: b.maxSteps,
    maxToolCalls: b.maxToolCalls,
    // the parent fixed an absolute deadline: what is left of it when the turn starts
    deadlineSeconds: b.deadlineAt === null ? null : Math.max(0.001, (b.deadlineAt - nowMs) / 1000),
    ...(b.maxTokens !== null ? { maxTokens: b.maxTokens } : {}),
    ...(b.maxCostUsd !== null ? { maxCostUsd: b.maxCostUsd } : {}),
    maxAttempts: null,
    approvalMode: task.permissions.approvalMode,
    agentName: task.name,
    ...(task.permissions.readOnly ? { readOnly: true } : {}),
    ...(task.treeLimits ? { treeLimits: task.treeLimits } : {}),
  };
}

/** What the model reads of an inbox message that enters its history. */
export function modelText(item: Pick<InboxItem, 'kind' | 'content'> | undefined): string {
  if (!item) return '';
  if (NOTICE_KINDS.has(item.kind) || item.kind === 'job_notice') return noticeText(item.kind, item.content);
  if (item.kind === 'subagent_task') {
    // a fork's transcript is a message of its own before this one (see startTurn)
    return parseChildTask(item.content)?.task ?? item.content;
  }
  return item.content;
}

/**
 * The parent's model-visible history as a transcript a forked child reads first: only closed
 * steps are in the history, so the parent's current step is never cut in half. The newest part is
 * kept when it is longer than the bound. When the history holds a checkpoint (`checkpointAt`, the
 * index of the latest), the child starts from it: the task and the checkpoint whole (what it pins
 * is exact), then the steps after it, the newest kept within the bound.
 */
export function forkTranscript(history: readonly HistoryItem[], checkpointAt: number | null = null): string {
  const line = (h: HistoryItem): string => {
    if (h.role === 'assistant') {
      const calls = h.toolCalls.map((c) => `[called ${c.name} ${c.arguments}]`).join(' ');
      return `assistant: ${h.content ?? ''}${calls ? ` ${calls}` : ''}`;
    }
    if (h.role === 'tool') return `tool ${h.name}: ${h.content}`;
    return `${h.role}: ${h.content}`;
  };
  const at = checkpointAt !== null && checkpointAt < history.length ? checkpointAt : null;
  const head = at === null ? '' : `${history.slice(0, at + 1).map(line).join('\n')}\n`;
  let text = history.slice(at === null ? 0 : at + 1).map(line).join('\n');
  if (text.length > FORK_TRANSCRIPT_CHARS) text = `[… earlier history left out]\n${text.slice(text.length - FORK_TRANSCRIPT_CHARS)}`;
  return `What your parent agent has seen and done so far (its history${at === null ? '' : ', from its latest checkpoint'}):\n${head}${text}`;
}

/**
 * Why a `subagent_task` message is not this child's to take (null: it is). The child's ID is
 * derived from its parent's spawn request, so only the task of that request, sent by that parent,
 * names it; and a child takes one task in its life (more work comes as follow-ups).
 */
export function refusedTask(actorId: string, p: Pick<Projection, 'parentLink'>, msg: Pick<InboxMessage, 'id' | 'from' | 'content'>): string | null {
  const task = parseChildTask(msg.content);
  if (!task) return 'the message is not a subagent task';
  if (task.requestId !== msg.id) return 'a subagent task travels under its spawn request\'s ID, and this one does not';
  if (childIdOf(task.requestId) !== actorId) return `spawn request ${task.requestId} names another child, not ${actorId}`;
  if (task.parentId !== msg.from) return `the task says it is from ${task.parentId} but came from ${msg.from}`;
  if (p.parentLink && p.parentLink.requestId !== task.requestId) return `this agent is already the child of spawn request ${p.parentLink.requestId}`;
  return null;
}
