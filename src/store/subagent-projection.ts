import type { ActorEvent, TurnOutcome } from '../protocol/events.js';
import type { BlobRef, Usage } from '../protocol/history.js';
import { ChildTaskSchema, SubagentNoticeSchema, type CarvedBudget, type ChildPermissions, type SpawnContext, type SpawnMode, type WorkspaceMode } from '../protocol/subagents.js';
import type { Projection } from './projection.js';
import { without } from './inbox-delivery.js';

// Subagents as the projection folds them (design §6b): a parent's children and the calls that
// wait for them; a child's link to its parent and the completion notice it still owes.

/** States of a child, as its parent's log tells them. */
export type ChildState = 'requested' | 'spawned' | 'completed' | 'failed' | 'stopped' | 'cancelled' | 'detached';

/** One child of this agent. */
export interface ChildRecord {
  requestId: string;
  name: string;
  mode: SpawnMode;
  /** The spawn call that asked for it. */
  callId: string;
  state: ChildState;
  /** Its budget reservation in this agent's log, until settled. */
  reservationId?: string;
  /** Completion notices received from it. */
  notices: number;
  /** The last notice received and not yet taken by a wait or a step (a foreground spawn reads it). */
  lastNotice?: string;
}

/** A spawn request the log holds whose child is not created yet: what creating it needs. */
export interface SpawnRequestRecord {
  name: string;
  depth: number;
  task: string;
  mode: SpawnMode;
  context: SpawnContext;
  permissions: ChildPermissions;
  budget: CarvedBudget;
}

/** A call that waits for children: a foreground spawn or `wait_agents`. */
export interface WaitRecord {
  childIds: string[];
  /** Any one of them reporting or ending ends the wait (`wait_agents`); else the one child's turn end (foreground). */
  any: boolean;
  deadlineAt: number | null;
}

/** What a child knows of its parent, from its task. */
export interface ParentLink {
  parentId: string;
  requestId: string;
  name: string;
  depth: number;
  mode: SpawnMode;
  workspaceMode: WorkspaceMode;
}

/** What a child's ended turn owes its parent: the notice's facts, from the `turn/end`. */
export interface NoticeOwed {
  turn: string;
  outcome: TurnOutcome;
  reason: string | null;
  answer: string | null;
  answerRef?: BlobRef;
  usage: Usage;
  costUsd: number | null;
  /** Steps and tool calls of the turn (absent in older snapshots). */
  steps?: number;
  toolCalls?: number;
  /** The messages the turn took (its task, its follow-ups): the tokens its place in the tree is held under. */
  messageIds?: string[];
}

/** Running children: asked for or spawned, and not ended or let go. */
export function runningChildren(p: Projection): string[] {
  return Object.entries(p.children ?? {}).filter(([, c]) => c.state === 'requested' || c.state === 'spawned').map(([id]) => id);
}

/** The child a spawn request names, if the log has the request. */
export function childOfRequest(p: Projection, requestId: string): string | undefined {
  return Object.entries(p.children ?? {}).find(([, c]) => c.requestId === requestId)?.[0];
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** Folds the subagent facts of one event (before the projection's own fold of it). */
export function foldSubagents(p: Projection, e: ActorEvent): void {
  switch (e.type) {
    case 'inbox/received': {
      if (e.data.kind === 'subagent_task' && !p.parentLink) {
        const t = ChildTaskSchema.safeParse(parseJson(e.data.content));
        if (t.success) {
          p.parentLink = {
            parentId: t.data.parentId, requestId: t.data.requestId, name: t.data.name, depth: t.data.depth, mode: t.data.mode,
            workspaceMode: t.data.permissions.workspaceMode,
          };
        }
      } else if (e.data.kind === 'subagent_completed') {
        const n = SubagentNoticeSchema.safeParse(parseJson(e.data.content));
        const c = n.success ? p.children?.[n.data.childId] : undefined;
        // its artifacts (a worktree's diff) are readable with artifact_read: the door stored them here
        if (n.success) for (const art of n.data.artifacts) (p.artifacts ??= {})[art.id] = art.digest;
        if (n.success && c) {
          if (c.state !== 'detached') c.state = n.data.outcome;
          c.notices += 1;
          c.lastNotice = e.data.messageId;
        }
      }
      break;
    }
    case 'subagent/spawn_requested': {
      const d = e.data;
      (p.children ??= {})[d.childId] = { requestId: d.requestId, name: d.name, mode: d.mode, callId: e.call ?? '', state: 'requested', notices: 0 };
      (p.spawnRequests ??= {})[d.requestId] = { name: d.name, depth: d.depth, task: d.task, mode: d.mode, context: d.context, permissions: d.permissions, budget: d.budget };
      break;
    }
    case 'subagent/spawned': {
      const c = p.children?.[e.data.childId];
      if (c && c.state === 'requested') c.state = 'spawned';
      if (p.spawnRequests) delete p.spawnRequests[e.data.requestId];
      break;
    }
    case 'subagent/message_sent': {
      // a follow-up gives an ended child work again
      const c = p.children?.[e.data.childId];
      if (c && e.data.kind === 'follow_up' && c.state !== 'requested' && c.state !== 'detached') c.state = 'spawned';
      break;
    }
    case 'subagent/detached': {
      const c = p.children?.[e.data.childId];
      if (c) c.state = 'detached';
      break;
    }
    case 'subagent/completed': {
      const item = p.inbox[e.data.messageId];
      if (item) p.inbox[e.data.messageId] = { ...item, state: 'included', content: '', request: null };
      if (p.nextStep) p.nextStep = without(p.nextStep, [e.data.messageId]);
      const c = p.children?.[e.data.childId];
      if (c?.lastNotice === e.data.messageId) delete c.lastNotice;
      break;
    }
    case 'request/prepared':
      // a notice a step's request holds (it came between waits) is read: no wait is owed it any more
      for (const c of Object.values(p.children ?? {})) if (c.lastNotice !== undefined && e.data.messageIds?.includes(c.lastNotice)) delete c.lastNotice;
      break;
    case 'subagent/waiting':
      if (e.call) (p.waits ??= {})[e.call] = { childIds: [...e.data.childIds], any: e.data.any, deadlineAt: e.data.deadlineAt };
      break;
    case 'tool/result':
    case 'tool/denied':
    case 'tool/cancelled':
    case 'tool/outcome_unknown':
      if (e.call && p.waits?.[e.call]) delete p.waits[e.call];
      break;
    case 'step/end':
      if (p.waits && Object.keys(p.waits).length > 0) p.waits = {};
      break;
    case 'budget/settled':
      for (const c of Object.values(p.children ?? {})) if (c.reservationId === e.data.reservationId) delete c.reservationId;
      break;
    case 'budget/reserved':
      if (e.data.kind === 'subagent' && e.call) {
        const c = Object.values(p.children ?? {}).find((x) => x.callId === e.call && x.reservationId === undefined);
        if (c) c.reservationId = e.data.reservationId;
      }
      break;
    case 'turn/start':
      if (p.parentLink) p.turnMessages = e.data.messageIds;
      break;
    case 'turn/end':
      if (e.data.noticeOwed === true) {
        p.noticeOwed = {
          turn: e.turn!, outcome: e.data.outcome, reason: e.data.reason, answer: e.data.answer, usage: e.data.usage, costUsd: e.data.costUsd ?? null,
          steps: e.data.steps, toolCalls: e.data.toolCalls,
          ...(p.turnMessages ? { messageIds: p.turnMessages } : {}),
          ...(e.data.answerRef ? { answerRef: e.data.answerRef } : {}),
        };
      }
      break;
    case 'subagent/notified':
      if (p.noticeOwed?.turn === e.data.turn) delete p.noticeOwed;
      break;
    default:
      break;
  }
}
