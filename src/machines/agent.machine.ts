import { assign, setup } from 'xstate';
import type { TurnOutcome } from '../protocol/events.js';
import { slot, type MachineEvent } from './machine-event.js';
import { changesSteers, nextSteers, STEER_KINDS, type SteerQueue } from './steer-queue.js';

/** Input of the agent machine. */
export interface AgentInput {
  actorId: string;
}

/** Context of the agent machine. */
export interface AgentContext {
  actorId: string;
  turns: number;
  /** Inbox messages received while a turn runs, waiting for the next turn (follow-ups), in order. */
  queued: string[];
  /** Messages named by the last `startTurn`, until its `turn/start` is seen. */
  claiming: string[];
  /** Source named by the last `startTurn`, so `recover` re-emits the same claim. */
  claimSource: ClaimSource | null;
  lastOutcome: TurnOutcome | null;
  /** An `interrupt` was received in the open turn (absent in older snapshots): a recovery cancels it too. */
  interrupted?: boolean;
  /** The interrupt message being carried out, for `interrupt/requested` (absent in older snapshots). */
  interruptId?: { messageId: string; from: string } | null;
  /** Steers no step included yet: one left when a turn ends starts the next (absent in older snapshots). */
  steers?: SteerQueue;
  /**
   * Approvals of the open turn a person has not answered yet, by ID, in the order asked (absent in
   * older snapshots, and read as none): the turn waits in `waiting_approval` until the last closes.
   */
  openApprovals?: string[];
  /** Questions of the open turn waiting for an answer, by ID (absent in older snapshots, read as none). */
  openQuestions?: string[];
}

/** Events the agent machine reacts to. */
export type AgentEvent = MachineEvent;
/** The `turn/end` event, as the branches of the agent's turn end see it. */
type TurnEndEvent = Extract<AgentEvent, { type: 'turn/end' }>;

/**
 * Kinds of message that start a turn when the agent is idle: a steer wakes the agent, and so do a
 * child's report or notice (the parent's turn then reads it) and a parent's task for a child.
 */
const STARTS_TURN = new Set(['user_message', 'follow_up', 'subagent_task', ...STEER_KINDS]);
/** Kinds that wait for the next turn while one runs. */
const NEXT_TURN = new Set(['user_message', 'follow_up', 'subagent_task']);
/** A person's interrupt, or a parent's of its child (the runtime checks the sender is the parent). */
const INTERRUPTS = new Set(['interrupt', 'subagent_interrupt']);

/** Sources of a turn the agent claims itself. */
type ClaimSource = 'user_message' | 'follow_up' | 'goal_continuation';

type Received = Extract<MachineEvent, { type: 'inbox/received' }>;

const isKind = (kinds: ReadonlySet<string>) => ({ event }: { event: Received }) => kinds.has(event.data.kind);
const interruptOf = ({ event }: { event: Received }) => ({ messageId: event.data.messageId, from: event.data.from });

/**
 * What every `turn/end` does before the agent claims its next work or goes idle: count the turn,
 * keep its outcome, forget its interrupt, and run the `turnEnded` slot. One list, spread into each
 * branch, so the branches differ only in what they claim next.
 */
const turnClosed = [
  assign<AgentContext, TurnEndEvent, undefined, AgentEvent, never>({
    turns: ({ context }) => context.turns + 1,
    lastOutcome: ({ event }) => event.data.outcome,
    interrupted: false,
    interruptId: null,
    // the projection forgets a turn's approvals at its end, and its questions end with it: so does the machine
    openApprovals: [],
    openQuestions: [],
  }),
  { type: 'turnEnded' as const, params: ({ event }: { event: TurnEndEvent }) => ({ outcome: event.data.outcome }) },
] as const;

// What a person is waited for, kept as the projection keeps it (src/store/projection.ts), so the
// state the machine is in and the state the log's fold names are the same at every event: an
// approval is open from its `approval/requested` until `approval/granted` or `approval/denied`
// (a person's answer, or its expiry) or the turn's end; a question from `ask/asked` until its
// `ask/answered` (answered, expired or cancelled) or the turn's end. A call cancelled or a step
// ended closes nothing of its own: the projection's approval stays pending until one of those.

type Asked = Extract<AgentEvent, { type: 'approval/requested' }>;
type Answered = Extract<AgentEvent, { type: 'approval/granted' | 'approval/denied' }>;
type QuestionAsked = Extract<AgentEvent, { type: 'ask/asked' }>;
type QuestionAnswered = Extract<AgentEvent, { type: 'ask/answered' }>;

const added = (ids: string[] | undefined, id: string): string[] => (ids?.includes(id) ? ids : [...(ids ?? []), id]);
const removed = (ids: string[] | undefined, id: string): string[] => (ids ?? []).filter((x) => x !== id);

/** The approvals still open once this answer is taken. */
const approvalsLeft = ({ context, event }: { context: AgentContext; event: Answered }) => removed(context.openApprovals, event.data.approvalId);
/** The questions still open once this answer is taken. */
const questionsLeft = ({ context, event }: { context: AgentContext; event: QuestionAnswered }) => removed(context.openQuestions, event.data.questionId);

/** An approval asked for: the turn waits for it, whatever else it waited for. */
const approvalAsked = {
  target: 'waiting_approval' as const,
  actions: assign<AgentContext, Asked, undefined, AgentEvent, never>({ openApprovals: ({ context, event }) => added(context.openApprovals, event.data.approvalId) }),
};
const questionAsked = assign<AgentContext, QuestionAsked, undefined, AgentEvent, never>({ openQuestions: ({ context, event }) => added(context.openQuestions, event.data.questionId) });
const takeApproval = assign<AgentContext, Answered, undefined, AgentEvent, never>({ openApprovals: approvalsLeft });
const takeQuestion = assign<AgentContext, QuestionAnswered, undefined, AgentEvent, never>({ openQuestions: questionsLeft });

/**
 * The agent: `idle → claiming → turn → idle`, `stopped`; inside a turn, `running ⇄
 * waiting_approval | waiting_input`. It claims work: an inbox message that starts a turn yields
 * `startTurn`, and the runtime commits `turn/start` in the same commit as the `inbox/received`
 * that claimed it. While a turn runs, user messages and follow-ups queue for the next turn and
 * steers wait for the next step; when the turn ends, steers no step took start the next turn,
 * then the oldest follow-up (design §6a: steer before follow-up), and when there is neither and
 * the `turn/end` says its goal goes on, a `goal_continuation` turn, the lowest of the sources. An
 * interrupt yields `interruptTurn` (`interrupt/requested`, then the abort). `waiting_approval` is
 * a turn one of whose calls waits for a person's approval, `waiting_input` one whose question
 * waits for an answer; approvals come first when both wait, as the actor parks for them first.
 */
export const agentMachine = setup({
  types: {} as { context: AgentContext; events: AgentEvent; input: AgentInput },
  actions: {
    startTurn: slot<{ messageIds: string[]; source: ClaimSource }>(),
    turnEnded: slot<{ outcome: TurnOutcome }>(),
    answerApproval: slot<{ messageId: string; from: string; content: string }>(),
    /** A person's answer to a question `ask_user` asked: the runtime checks it against the questions the log holds. */
    answerQuestion: slot<{ messageId: string; from: string; content: string }>(),
    /** Commit `interrupt/requested` for the open turn, then cancel it as an `abort` does. */
    interruptTurn: slot<{ messageId: string; from: string }>(),
    /** A message the agent cannot act on now (an interrupt with no turn to stop): `inbox/cancelled`. */
    refuseMessage: slot<{ messageId: string; reason: string }>(),
    /** A person's change of the goal (`goal_control`): the runtime checks it against the goal the log holds. */
    controlGoal: slot<{ messageId: string; content: string }>(),
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
    // in any state: the runtime checks the answer against the approvals (questions) the log holds
    'inbox/received': [
      {
        guard: ({ event }) => event.data.kind === 'approval_response',
        actions: {
          type: 'answerApproval',
          params: ({ event }) => ({ messageId: event.data.messageId, from: event.data.from, content: event.data.content }),
        },
      },
      {
        guard: ({ event }) => event.data.kind === 'goal_control',
        actions: { type: 'controlGoal', params: ({ event }) => ({ messageId: event.data.messageId, content: event.data.content }) },
      },
      {
        guard: ({ event }) => event.data.kind === 'ask_answer',
        actions: {
          type: 'answerQuestion',
          params: ({ event }) => ({ messageId: event.data.messageId, from: event.data.from, content: event.data.content }),
        },
      },
    ],
    'inbox/cancelled': {
      actions: [assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }), assign({ queued: ({ context, event }) => context.queued.filter((id) => id !== event.data.messageId) })],
    },
    'subagent/completed': { guard: ({ context, event }) => changesSteers(context.steers, event), actions: assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }) },
    // guarded: an event that changes no steer queue copies no context (most steps have no steer)
    'step/start': { guard: ({ context, event }) => changesSteers(context.steers, event), actions: assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }) },
    'request/prepared': { guard: ({ context, event }) => changesSteers(context.steers, event), actions: assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }) },
    'step/end': { guard: ({ context, event }) => changesSteers(context.steers, event), actions: assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }) },
    'recovery/started': { guard: ({ context, event }) => changesSteers(context.steers, event), actions: assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }) },
  },
  states: {
    idle: {
      on: {
        'inbox/received': [
          {
            guard: isKind(STARTS_TURN),
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
          {
            guard: ({ event }) => INTERRUPTS.has(event.data.kind),
            actions: { type: 'refuseMessage', params: ({ event }) => ({ messageId: event.data.messageId, reason: 'nothing to interrupt: no turn is running' }) },
          },
        ],
        'turn/start': { target: 'turn', actions: assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }) },
      },
    },
    /** `startTurn` was asked for; `turn/start` has not been seen yet. */
    claiming: {
      on: {
        'turn/start': [
          {
            // an interrupt that came before the turn it stops was committed: carried out once it is
            guard: ({ context }) => context.interrupted === true,
            target: 'turn',
            actions: [
              assign({ claiming: [], claimSource: null }),
              assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }),
              { type: 'interruptTurn', params: ({ context }) => context.interruptId ?? { messageId: '', from: 'runtime' } },
            ],
          },
          { target: 'turn', actions: [assign({ claiming: [], claimSource: null }), assign({ steers: ({ context, event }) => nextSteers(context.steers, event) })] },
        ],
        // a follow-up's `turn/start` commits after the `turn/end` that claimed it, so a message
        // can land in between; queue it for the next turn rather than drop it
        'inbox/received': [
          {
            guard: isKind(NEXT_TURN),
            actions: assign({ queued: ({ context, event }) => [...context.queued, event.data.messageId] }),
          },
          { guard: ({ event }) => STEER_KINDS.has(event.data.kind), actions: assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }) },
          {
            guard: ({ event }) => INTERRUPTS.has(event.data.kind),
            actions: assign({ interrupted: true, interruptId: interruptOf }),
          },
        ],
        recover: {
          actions: {
            type: 'startTurn',
            params: ({ context }) => ({ messageIds: context.claiming, source: context.claimSource! }),
          },
        },
      },
    },
    turn: {
      initial: 'running',
      states: {
        // While running no approval or question is open, so an answer here has nothing to close
        // (an older snapshot's open ones, which it did not keep, are read as none).
        running: {
          on: {
            'approval/requested': approvalAsked,
            'ask/asked': { target: 'waiting_input', actions: questionAsked },
          },
        },
        /**
         * A call of the turn waits for a person's approval (design §5). It stays here until the
         * last open approval closes, then goes on to a question that waits too, or runs: approvals
         * come first, as the actor parks for them first.
         */
        waiting_approval: {
          on: {
            // targetless: the turn waits on, for one approval more
            'approval/requested': { actions: approvalAsked.actions },
            'approval/granted': [
              { guard: (a) => approvalsLeft(a).length > 0, actions: takeApproval },
              { guard: ({ context }) => (context.openQuestions?.length ?? 0) > 0, target: 'waiting_input', actions: takeApproval },
              { target: 'running', actions: takeApproval },
            ],
            'approval/denied': [
              { guard: (a) => approvalsLeft(a).length > 0, actions: takeApproval },
              { guard: ({ context }) => (context.openQuestions?.length ?? 0) > 0, target: 'waiting_input', actions: takeApproval },
              { target: 'running', actions: takeApproval },
            ],
            'ask/asked': { actions: questionAsked },
            'ask/answered': { actions: takeQuestion },
          },
        },
        /** A question of the turn waits for a person (design §5); the answer, expiry or cancel of the last goes on. */
        waiting_input: {
          on: {
            'approval/requested': approvalAsked,
            'ask/asked': { actions: questionAsked },
            'ask/answered': [
              { guard: (a) => questionsLeft(a).length > 0, actions: takeQuestion },
              { target: 'running', actions: takeQuestion },
            ],
          },
        },
      },
      on: {
        'inbox/received': [
          {
            guard: isKind(NEXT_TURN),
            actions: assign({ queued: ({ context, event }) => [...context.queued, event.data.messageId] }),
          },
          { guard: ({ event }) => STEER_KINDS.has(event.data.kind), actions: assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }) },
          {
            // wherever the agent is hosted, a person's Ctrl-C reaches it as mail (design §6a)
            guard: ({ event }) => INTERRUPTS.has(event.data.kind),
            actions: [
              assign({ interrupted: true, interruptId: interruptOf }),
              { type: 'interruptTurn', params: interruptOf },
            ],
          },
        ],
        // the interrupt is in the log but the turn is not closed: the recovering incarnation carries it out
        recover: {
          guard: ({ context }) => context.interrupted === true,
          actions: { type: 'interruptTurn', params: ({ context }) => context.interruptId ?? { messageId: '', from: 'runtime' } },
        },
        'turn/end': [
          {
            // steers no step took: the person's word comes first (design §6a), in a turn of their own
            guard: ({ context }) => (context.steers?.pending.length ?? 0) > 0,
            target: 'claiming',
            actions: [
              ...turnClosed,
              assign({ claiming: ({ context }) => context.steers!.pending, claimSource: 'user_message' }),
              {
                type: 'startTurn',
                params: ({ context }) => ({ messageIds: context.claiming, source: 'user_message' as const }),
              },
            ],
          },
          {
            guard: ({ context }) => context.queued.length > 0,
            target: 'claiming',
            actions: [
              ...turnClosed,
              assign({ claiming: ({ context }) => context.queued.slice(0, 1), claimSource: 'follow_up' }),
              {
                type: 'startTurn',
                params: ({ context }) => ({ messageIds: context.queued.slice(0, 1), source: 'follow_up' as const }),
              },
              assign({ queued: ({ context }) => context.queued.slice(1) }),
            ],
          },
          {
            // nothing a person sent waits: the goal the turn worked on goes on (design §6a: lowest source)
            guard: ({ event }) => event.data.goalContinues === true,
            target: 'claiming',
            actions: [
              ...turnClosed,
              assign({ claiming: [], claimSource: 'goal_continuation' }),
              { type: 'startTurn', params: { messageIds: [], source: 'goal_continuation' as const } },
            ],
          },
          {
            target: 'idle',
            actions: [
              ...turnClosed,
            ],
          },
        ],
      },
    },
    stopped: { type: 'final' },
  },
});
