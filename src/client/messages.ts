import { newId } from '../protocol/ids.js';
import type { TurnRequest } from '../protocol/events.js';
import type { InboxMessage } from '../protocol/inbox.js';

// Every inbox message a client sends is built here (design §6, §11): the CLI's commands, both
// client transports and the gateway's write side take them from this one module, so a message
// kind's route (target, wakeup) and content shape are said once. Imports protocol alone: the
// page may build its messages with it too.

/** The name every person's command gives itself (anything else reads `client:unknown`). */
export const CLI_SENDER = 'client:cli';

/** Who the gateway's messages come from (the inbox door keeps a plain client name). */
export const GATEWAY_SENDER = 'client:gateway';

/** What a person's text can be sent as (design §6): into the running turn, or as a turn of its own. */
export type TextKind = 'steer' | 'inject' | 'follow_up' | 'user_message';

/** Where each kind lands and whether it wakes the agent (design §6, "Kinds of message"). */
const ROUTE: Record<TextKind, Pick<InboxMessage, 'target' | 'wakeup'>> = {
  steer: { target: 'next_step', wakeup: true },
  inject: { target: 'next_step', wakeup: false },
  follow_up: { target: 'next_turn', wakeup: true },
  user_message: { target: 'next_turn', wakeup: true },
};

/** A person's answer to an approval. */
export type ApprovalAnswer = { decision: 'approve'; always: boolean } | { decision: 'deny'; reason: string | null };

/** A person's answer to one question: an option, their own words, or both. */
export interface PersonAnswer {
  optionId?: string;
  text?: string;
}

/** A person's change of an agent's goal, bound to the goal revision they saw. */
export interface GoalChange {
  action: 'pause' | 'resume' | 'cancel';
  expectedRevision: number;
}

function message(
  from: string, to: string, kind: InboxMessage['kind'], route: Pick<InboxMessage, 'target' | 'wakeup'>, content: string, request: TurnRequest | null = null,
): InboxMessage {
  return { id: newId('message'), from, to, kind, ...route, content, request, sentAt: new Date().toISOString() };
}

const NOW = { target: 'now', wakeup: true } as const;

/**
 * A person's text for an agent's inbox. `request` is null: a turn it starts takes the settings of
 * the agent's last turn (`resolveSettings`), as a follow-up does; a task's settings are `run`'s to set.
 */
export function textMessage(agentId: string, kind: TextKind, text: string, from: string = CLI_SENDER): InboxMessage {
  return message(from, agentId, kind, ROUTE[kind], text);
}

/** The task of an agent's turn with its settings: a new agent's first (`run`), or a next one (an accepted plan). */
export function taskMessage(agentId: string, task: string, request: TurnRequest, from: string = CLI_SENDER): InboxMessage {
  return message(from, agentId, 'user_message', ROUTE.user_message, task, request);
}

/**
 * The message that carries the next task, with its settings (only a person's message may carry
 * them): to an idle agent the task of its next turn, as `run`'s is; to one in a turn, a follow-up
 * it takes when that turn ends.
 */
export function nextTaskMessage(agentId: string, task: string, request: TurnRequest, busy: boolean, from: string = CLI_SENDER): InboxMessage {
  return message(from, agentId, busy ? 'follow_up' : 'user_message', ROUTE.follow_up, task, request);
}

/** The inbox message that carries a person's answer, bound to the plan digest they were shown. */
export function approvalMessage(agentId: string, approvalId: string, planDigest: string, answer: ApprovalAnswer, from: string = CLI_SENDER): InboxMessage {
  const content =
    answer.decision === 'approve'
      ? { approvalId, decision: 'approve', planDigest, always: answer.always }
      : { approvalId, decision: 'deny', planDigest, ...(answer.reason ? { reason: answer.reason } : {}) };
  return message(from, agentId, 'approval_response', NOW, JSON.stringify(content));
}

/** The inbox message that carries a person's answer to a question (the content `ask_answer` takes). */
export function questionAnswerMessage(agentId: string, questionId: string, answer: PersonAnswer, from: string = CLI_SENDER): InboxMessage {
  const content = { questionId, ...(answer.optionId !== undefined ? { optionId: answer.optionId } : {}), ...(answer.text !== undefined ? { text: answer.text } : {}) };
  return message(from, agentId, 'ask_answer', NOW, JSON.stringify(content));
}

/** The inbox message a person's Ctrl-C (or `interrupt`) sends: cancel the open turn, wherever it is hosted. */
export function interruptMessage(agentId: string, from: string = CLI_SENDER): InboxMessage {
  return message(from, agentId, 'interrupt', NOW, 'interrupted');
}

/**
 * A person's ask for a checkpoint (`actorloop compact`): the agent compacts its closed steps at its
 * next step boundary (a turn's first step when it is idle), whether or not its request fits.
 */
export function compactMessage(agentId: string, from: string = CLI_SENDER): InboxMessage {
  return message(from, agentId, 'compact', { target: 'next_step', wakeup: false }, 'compact');
}

/** The message that carries a person's change of the goal. */
export function goalControlMessage(agentId: string, change: GoalChange, from: string = CLI_SENDER): InboxMessage {
  return message(from, agentId, 'goal_control', NOW, JSON.stringify(change));
}
