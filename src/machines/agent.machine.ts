import { assign, setup } from 'xstate';
import type { TurnOutcome } from '../protocol/events.js';
import { slot, type MachineEvent } from './machine-event.js';

/** Input of the agent machine. */
export interface AgentInput {
  actorId: string;
}

/** Context of the agent machine. */
export interface AgentContext {
  actorId: string;
  turns: number;
  /** Inbox messages received while a turn runs, waiting for the next turn (follow-ups). */
  queued: string[];
  /** Messages named by the last `startTurn`, until its `turn/start` is seen. */
  claiming: string[];
  /** Source named by the last `startTurn`, so `recover` re-emits the same claim. */
  claimSource: ClaimSource | null;
  lastOutcome: TurnOutcome | null;
  /** An `interrupt` was received in the open turn (absent in older snapshots): a recovery cancels it too. */
  interrupted?: boolean;
}

/** Events the agent machine reacts to. */
export type AgentEvent = MachineEvent;

const STARTS_TURN = new Set(['user_message', 'follow_up']);

/** Sources of a turn the agent claims itself. */
type ClaimSource = 'user_message' | 'follow_up';

/**
 * The agent: `idle → turn → idle`, `stopped`. It claims work: an inbox message that starts a
 * turn yields `startTurn`, and the runtime commits `turn/start` in the same commit as the
 * `inbox/received` that claimed it. `waiting_*` states are entered by later issues.
 */
export const agentMachine = setup({
  types: {} as { context: AgentContext; events: AgentEvent; input: AgentInput },
  actions: {
    startTurn: slot<{ messageIds: string[]; source: ClaimSource }>(),
    turnEnded: slot<{ outcome: TurnOutcome }>(),
    answerApproval: slot<{ messageId: string; from: string; content: string }>(),
    /** A person's answer to a question `ask_user` asked: the runtime checks it against the questions the log holds. */
    answerQuestion: slot<{ messageId: string; from: string; content: string }>(),
    /** Cancel the open turn as an `abort` does: an interrupt came through the inbox. */
    interruptTurn: slot<{ reason: 'interrupted' }>(),
  },
}).createMachine({
  id: 'agent',
  initial: 'idle',
  context: ({ input }) => ({
    actorId: input.actorId,
    turns: 0,
    queued: [],
    claiming: [],
    claimSource: null,
    lastOutcome: null,
  }),
  on: {
    'actor/stopped': { target: '.stopped' },
    // in any state: the runtime checks the answer against the approvals the log holds
    'inbox/received': [
      {
        guard: ({ event }) => event.data.kind === 'approval_response',
        actions: {
          type: 'answerApproval',
          params: ({ event }) => ({ messageId: event.data.messageId, from: event.data.from, content: event.data.content }),
        },
      },
      {
        guard: ({ event }) => event.data.kind === 'ask_answer',
        actions: {
          type: 'answerQuestion',
          params: ({ event }) => ({ messageId: event.data.messageId, from: event.data.from, content: event.data.content }),
        },
      },
    ],
  },
  states: {
    idle: {
      on: {
        'inbox/received': {
          guard: ({ event }) => STARTS_TURN.has(event.data.kind),
          target: 'claiming',
          actions: [
            assign({
              claiming: ({ event }) => [event.data.messageId],
              claimSource: ({ event }) => (event.data.kind === 'follow_up' ? 'follow_up' : 'user_message'),
            }),
            {
              type: 'startTurn',
              params: ({ context }) => ({ messageIds: context.claiming, source: context.claimSource! }),
            },
          ],
        },
        'turn/start': { target: 'turn' },
      },
    },
    /** `startTurn` was asked for; `turn/start` has not been seen yet. */
    claiming: {
      on: {
        'turn/start': { target: 'turn', actions: assign({ claiming: [], claimSource: null }) },
        // a follow-up's `turn/start` commits after the `turn/end` that claimed it, so a message
        // can land in between; queue it for the next turn rather than drop it
        'inbox/received': {
          guard: ({ event }) => STARTS_TURN.has(event.data.kind),
          actions: assign({ queued: ({ context, event }) => [...context.queued, event.data.messageId] }),
        },
        recover: {
          actions: {
            type: 'startTurn',
            params: ({ context }) => ({ messageIds: context.claiming, source: context.claimSource! }),
          },
        },
      },
    },
    turn: {
      on: {
        'inbox/received': [
          {
            guard: ({ event }) => STARTS_TURN.has(event.data.kind),
            actions: assign({ queued: ({ context, event }) => [...context.queued, event.data.messageId] }),
          },
          {
            // wherever the agent is hosted, a person's Ctrl-C reaches it as mail (design §6a)
            guard: ({ event }) => event.data.kind === 'interrupt',
            actions: [assign({ interrupted: true }), { type: 'interruptTurn', params: { reason: 'interrupted' } }],
          },
        ],
        // the interrupt is in the log but the turn is not closed: the recovering incarnation carries it out
        recover: {
          guard: ({ context }) => context.interrupted === true,
          actions: { type: 'interruptTurn', params: { reason: 'interrupted' } },
        },
        'turn/end': [
          {
            guard: ({ context }) => context.queued.length > 0,
            target: 'claiming',
            actions: [
              assign({
                turns: ({ context }) => context.turns + 1,
                lastOutcome: ({ event }) => event.data.outcome,
                interrupted: false,
              }),
              { type: 'turnEnded', params: ({ event }) => ({ outcome: event.data.outcome }) },
              assign({ claiming: ({ context }) => context.queued.slice(0, 1), claimSource: 'follow_up' }),
              {
                type: 'startTurn',
                params: ({ context }) => ({ messageIds: context.queued.slice(0, 1), source: 'follow_up' as const }),
              },
              assign({ queued: ({ context }) => context.queued.slice(1) }),
            ],
          },
          {
            target: 'idle',
            actions: [
              assign({
                turns: ({ context }) => context.turns + 1,
                lastOutcome: ({ event }) => event.data.outcome,
                interrupted: false,
              }),
              { type: 'turnEnded', params: ({ event }) => ({ outcome: event.data.outcome }) },
            ],
          },
        ],
      },
    },
    waiting_input: {},
    waiting_approval: {},
    waiting_job: {},
    stopped: { type: 'final' },
  },
});
