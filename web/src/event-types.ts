import type { EventType } from '../../src/protocol/events.js';

/**
 * Every event type, by name: an SSE stream names each message by its event's type, and a browser
 * hands a named message only to a listener of that name. `satisfies` makes the compiler say when
 * the protocol adds a type this list lacks.
 */
export const EVENT_TYPES = Object.keys({
  'turn/start': true, 'user/message': true, 'turn/end': true, 'step/start': true, 'request/prepared': true, 'attempt/start': true,
  'attempt/end': true, 'assistant/accepted': true, 'assistant/rejected': true, 'tool/call': true, 'policy/decided': true,
  'approval/requested': true, 'approval/granted': true, 'approval/denied': true, 'tool/start': true, 'tool/reconciled': true,
  'tool/result': true, 'tool/denied': true, 'budget/reserved': true, 'budget/settled': true, 'stop/decided': true,
  'tool/cancelled': true, 'tool/outcome_unknown': true, 'step/end': true, 'inbox/received': true, 'inbox/cancelled': true,
  'recovery/started': true, 'recovery/continuation': true, 'actor/rehydrated': true, 'actor/killed': true, 'actor/released': true,
  'actor/stopped': true, 'interrupt/requested': true, 'ask/asked': true, 'ask/answered': true, 'plan/replaced': true,
  'completion/rejected': true, 'goal/created': true, 'goal/updated': true, 'actor/parked': true, 'subagent/spawn_requested': true,
  'subagent/spawned': true, 'subagent/message_sent': true, 'subagent/reported': true, 'subagent/completed': true,
  'subagent/notified': true, 'subagent/waiting': true, 'subagent/detached': true,
  'doc/loaded': true, 'skills/indexed': true, 'skill/loaded': true, 'memory/loaded': true, 'retrieval/loaded': true,
  'memory/changed': true, 'compaction/started': true, 'checkpoint/committed': true, 'compaction/rejected': true,
  'job/created': true, 'job/started': true, 'job/phase': true, 'job/cancel_requested': true, 'job/notified': true,
  'workflow/created': true, 'node/started': true, 'node/ended': true, 'workflow/cancel_requested': true, 'workflow/ended': true,
} satisfies Record<EventType, true>) as EventType[];
