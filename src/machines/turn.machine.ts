import { assign, setup } from 'xstate';
import type { Budgets, TurnOutcome } from '../protocol/events.js';
import { addUsage, ZERO_USAGE, type BlobRef, type Usage } from '../protocol/history.js';
import { eventTimeMs, slot, type MachineEvent } from './machine-event.js';
import { changesSteers, nextSteers, type SteerQueue } from './steer-queue.js';
import { COMPLETION_BLOCK_PREFIX, COMPLETION_EXHAUSTED, COMPLETION_EXHAUSTED_STOP, DEFAULT_MAX_COMPLETION_REJECTIONS, type OnCompletionExhausted } from '../protocol/completion.js';

/** Input of the turn machine, taken from `turn/start`. */
export interface TurnInput {
  turnId: string;
  budgets: Budgets;
  /** Answers the completion policy may refuse before the turn fails; absent: the default. */
  maxCompletionRejections?: number;
  /** What the refusal at that limit does (`on_completion_exhausted`); absent: `fail`. */
  onCompletionExhausted?: OnCompletionExhausted;
}

/** A completion policy's refusal of the step's answer, until the step ends. */
export interface CompletionRefusal {
  policy: string;
  missing: string[];
  /** The agent's goal was active when the answer was refused (absent in older snapshots: false). */
  goalActive?: boolean;
}

/** Context of the turn machine. */
export interface TurnContext {
  turnId: string;
  budgets: Budgets;
  steps: number;
  toolCalls: number;
  usage: Usage;
  answer: string | null;
  /** The blob holding the answer whole, when it was too big for the log (absent in older snapshots). */
  answerRef?: BlobRef | null;
  /** Set once the turn has decided to end; re-emitted on `recover`. */
  ending: EndTurnParams | null;
  /** Why in-flight work was aborted (deadline, cancel), once it was. */
  abortReason: string | null;
  /** Final answers refused by validation so far. */
  rejections: number;
  /** Steers received during the turn that no step has included yet (absent in older snapshots). */
  steers?: SteerQueue;
  /** The model's stop decision (`stop/decided`): the turn ends `stopped` with it after its step. */
  stopReason?: string;
  /** Answers the completion policy refused so far (absent in older snapshots: none). */
  completionRejections?: number;
  /** The limit of those (absent in older snapshots: the default). */
  maxCompletionRejections?: number;
  /** The open step's answer was refused by the completion policy (`completion/rejected`). */
  refusal?: CompletionRefusal | null;
  /** What the refusal at the limit does (absent in older snapshots: `fail`). */
  onCompletionExhausted?: OnCompletionExhausted;
  /**
   * The children's part of the turn's steps and tool calls: each running child's carve, held until
   * its settlement, and what settled ones charged (absent in older snapshots: none).
   */
  carves?: ChildCarves;
}

/** Steps and tool calls the turn's children hold (by reservation) and have spent. */
export interface ChildCarves {
  held: Record<string, { steps: number; calls: number }>;
  steps: number;
  calls: number;
}

/** Steps and tool calls of the turn's children, held and spent. */
function childCounts(context: TurnContext): { steps: number; calls: number } {
  const c = context.carves;
  if (!c) return { steps: 0, calls: 0 };
  let { steps, calls } = c;
  for (const h of Object.values(c.held)) {
    steps += h.steps;
    calls += h.calls;
  }
  return { steps, calls };
}

/** The carves after a child's reservation or its settlement; undefined when the event is neither. */
function nextCarves(context: TurnContext, e: MachineEvent): ChildCarves | undefined {
  const c = context.carves ?? { held: {}, steps: 0, calls: 0 };
  if (e.type === 'budget/reserved' && e.data.kind === 'subagent') {
    return { ...c, held: { ...c.held, [e.data.reservationId]: { steps: e.data.steps ?? 0, calls: e.data.calls ?? 0 } } };
  }
  if (e.type === 'budget/settled' && c.held[e.data.reservationId]) {
    const { [e.data.reservationId]: _gone, ...held } = c.held;
    const charged = e.data.outcome === 'charged';
    return { held, steps: c.steps + (charged ? (e.data.steps ?? 0) : 0), calls: c.calls + (charged ? (e.data.calls ?? 0) : 0) };
  }
  return undefined;
}

/** Final answers a turn may have refused (structured output) before it fails. */
export const MAX_REJECTED_ANSWERS = 3;

/** Events the turn machine reacts to. */
export type TurnEvent = MachineEvent;

/** Params of the `endTurn` effect: everything `turn/end` records. */
export interface EndTurnParams {
  outcome: TurnOutcome;
  reason: string | null;
  answer: string | null;
  /** The blob holding the answer whole; `answer` is then its preview. */
  answerRef?: BlobRef;
  steps: number;
  toolCalls: number;
  usage: Usage;
  /**
   * Under `block`: the reason the agent's goal is `blocked` with, staged by the runtime before
   * `turn/end` in its commit (not itself part of `turn/end`).
   */
  blockGoal?: string;
}

function end(context: TurnContext, outcome: TurnOutcome, reason: string | null): EndTurnParams {
  const params: EndTurnParams = {
    outcome,
    reason,
    answer: outcome === 'completed' ? context.answer : null,
    steps: context.steps,
    toolCalls: context.toolCalls,
    usage: context.usage,
  };
  if (outcome === 'completed' && context.answerRef) params.answerRef = context.answerRef;
  return params;
}

/** Decides what follows a Step: the next Step, or the end of the Turn with its outcome and reason. */
function settle(context: TurnContext, e: Extract<MachineEvent, { type: 'step/end' }>): EndTurnParams | null {
  const { outcome, reason } = e.data;
  // the model decided to stop (the `stop` tool, or a stop answer): that wins over a steer or a next step
  if (context.stopReason !== undefined && (outcome === 'final' || outcome === 'tool_calls')) return end(context, 'stopped', context.stopReason);
  switch (outcome) {
    case 'final':
      // refused by the completion policy: asked again with what is missing, up to a limit; then
      // the turn fails saying which policy and what, and a person decides; under `block` an
      // active goal is blocked instead and the turn stops (a person resumes the goal to go on)
      if (context.refusal) {
        const refused = (context.completionRejections ?? 0) + 1;
        if (refused < completionLimit(context)) break;
        if (context.onCompletionExhausted === 'block' && context.refusal.goalActive === true) {
          return { ...end(context, 'stopped', COMPLETION_EXHAUSTED_STOP), blockGoal: blockReason(context.refusal) };
        }
        return end(context, 'failed', exhaustedReason(context.refusal, refused));
      }
      // a steer that came while the model answered: one more step includes it, budgets allowing
      if (context.steers && context.steers.pending.length > 0 && context.abortReason === null && !spent(context, e)) return null;
      return end(context, 'completed', null);
    case 'failed':
      return end(context, 'failed', reason);
    case 'stopped':
      return end(context, 'stopped', reason);
    case 'cancelled':
      return end(context, 'cancelled', reason);
    case 'rejected':
      // asked again with the reason, up to a limit; then the turn fails saying why
      if (context.rejections + 1 >= MAX_REJECTED_ANSWERS) return end(context, 'failed', `invalid final answer: ${reason}`);
      break;
    case 'tool_calls':
      break;
  }
  // once in-flight work was aborted, no further Step starts: an abort that lands while tools run
  // cancels the pending calls, and that Step still ends `tool_calls`
  // A deadline stops the turn; any other abort (an interrupt, a shutdown) cancels it.
  if (context.abortReason !== null) return end(context, abortOutcome(context.abortReason), context.abortReason);
  const { maxSteps, maxToolCalls, deadlineAt } = context.budgets;
  // what children hold or spent of the turn's steps and calls is the turn's too (a carve)
  const children = childCounts(context);
  if (deadlineAt !== null && eventTimeMs(e) >= deadlineAt) return end(context, 'stopped', 'deadline');
  if (maxSteps !== null && context.steps + children.steps >= maxSteps) return end(context, 'stopped', 'step_budget');
  if (maxToolCalls !== null && context.toolCalls + children.calls >= maxToolCalls) return end(context, 'stopped', 'tool_budget');
  return null;
}

/**
 * A Turn loops Steps until one ends it: `launching` (a Step was asked for) → `stepping` → settle
 * → `launching` again or `ending` (the `turn/end` was asked for) → `done`. Budgets are checked
 * when a Step ends; the deadline is absolute, so a `tick` after rehydrate still fires it.
 */
export const turnMachine = setup({
  types: {} as { context: TurnContext; events: TurnEvent; input: TurnInput },
  actions: {
    startStep: slot<{ index: number; toolBudgetLeft: number | null }>(),
    endTurn: slot<EndTurnParams>(),
    abortWork: slot<{ reason: string }>(),
  },
}).createMachine({
  id: 'turn',
  initial: 'launching',
  context: ({ input }) => ({
    turnId: input.turnId,
    budgets: input.budgets,
    steps: 0,
    toolCalls: 0,
    usage: ZERO_USAGE,
    answer: null,
    ending: null,
    abortReason: null,
    rejections: 0,
    completionRejections: 0,
    maxCompletionRejections: input.maxCompletionRejections ?? DEFAULT_MAX_COMPLETION_REJECTIONS,
    refusal: null,
    onCompletionExhausted: input.onCompletionExhausted ?? 'fail',
  }),
  on: {
    // guarded: an event that changes no steer queue copies no context (most steps have no steer)
    'inbox/received': { guard: ({ context, event }) => changesSteers(context.steers, event), actions: assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }) },
    'inbox/cancelled': { guard: ({ context, event }) => changesSteers(context.steers, event), actions: assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }) },
    // a child's notice a waiting call took is no longer waiting for a step
    'subagent/completed': { guard: ({ context, event }) => changesSteers(context.steers, event), actions: assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }) },
    'request/prepared': { guard: ({ context, event }) => changesSteers(context.steers, event), actions: assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }) },
    'recovery/started': { guard: ({ context, event }) => changesSteers(context.steers, event), actions: assign({ steers: ({ context, event }) => nextSteers(context.steers, event) }) },
    'attempt/end': { actions: assign({ usage: ({ context, event }) => addUsage(context.usage, event.data.usage) }) },
    'stop/decided': { actions: assign({ stopReason: ({ event }) => event.data.reason }) },
    // a child's carve holds steps and calls of the turn until it is settled
    'budget/reserved': { guard: ({ context, event }) => nextCarves(context, event) !== undefined, actions: assign({ carves: ({ context, event }) => nextCarves(context, event)! }) },
    'budget/settled': { guard: ({ context, event }) => nextCarves(context, event) !== undefined, actions: assign({ carves: ({ context, event }) => nextCarves(context, event)! }) },
    'tool/start': {
      guard: ({ event }) => !event.data.rerun,
      actions: assign({ toolCalls: ({ context }) => context.toolCalls + 1 }),
    },
    'completion/rejected': {
      actions: assign({
        refusal: ({ event }) => ({ policy: event.data.policy, missing: event.data.missing, ...(event.data.goalActive ? { goalActive: true } : {}) }),
      }),
    },
    'assistant/accepted': {
      actions: assign({ answer: ({ event }) => event.data.content, answerRef: ({ event }) => event.data.contentRef ?? null }),
    },
    tick: {
      guard: ({ context, event }) =>
        context.abortReason === null &&
        context.budgets.deadlineAt !== null &&
        event.nowMs >= context.budgets.deadlineAt,
      actions: [assign({ abortReason: 'deadline' }), { type: 'abortWork', params: { reason: 'deadline' } }],
    },
    abort: {
      guard: ({ context }) => context.abortReason === null,
      actions: [
        assign({ abortReason: ({ event }) => event.reason }),
        { type: 'abortWork', params: ({ event }) => ({ reason: event.reason }) },
      ],
    },
    'turn/end': { target: '.done' },
  },
  states: {
    launching: {
      entry: {
        type: 'startStep',
        params: ({ context }) => ({ index: context.steps + 1, toolBudgetLeft: toolBudgetLeft(context) }),
      },
      on: {
        'step/start': { target: 'stepping', actions: assign({ steps: ({ context }) => context.steps + 1, steers: ({ context, event }) => nextSteers(context.steers, event) }) },
        recover: {
          actions: {
            type: 'startStep',
            params: ({ context }) => ({ index: context.steps + 1, toolBudgetLeft: toolBudgetLeft(context) }),
          },
        },
      },
    },
    stepping: {
      on: {
        'step/end': [
          {
            guard: ({ context, event }) => settle(context, event) !== null,
            target: 'ending',
            actions: assign({ ending: ({ context, event }) => settle(context, event), steers: ({ context, event }) => nextSteers(context.steers, event), refusal: null }),
          },
          {
            target: 'launching',
            actions: assign({
              rejections: ({ context, event }) => context.rejections + (event.data.outcome === 'rejected' ? 1 : 0),
              completionRejections: ({ context }) => (context.completionRejections ?? 0) + (context.refusal ? 1 : 0),
              refusal: null,
              steers: ({ context, event }) => nextSteers(context.steers, event),
            }),
          },
        ],
      },
    },
    ending: {
      entry: { type: 'endTurn', params: ({ context }) => context.ending! },
      on: {
        recover: { actions: { type: 'endTurn', params: ({ context }) => context.ending! } },
      },
    },
    done: { type: 'final' },
  },
});

/** True when the turn's budgets allow no further step. */
function spent(context: TurnContext, e: Extract<MachineEvent, { type: 'step/end' }>): boolean {
  const { maxSteps, deadlineAt } = context.budgets;
  return (deadlineAt !== null && eventTimeMs(e) >= deadlineAt) || (maxSteps !== null && context.steps + childCounts(context).steps >= maxSteps);
}

function toolBudgetLeft(context: TurnContext): number | null {
  const max = context.budgets.maxToolCalls;
  return max === null ? null : Math.max(0, max - context.toolCalls - childCounts(context).calls);
}

/** Abort reasons that are a budget running out: the turn is `stopped`, not cancelled. */
export const BUDGET_ABORTS: ReadonlySet<string> = new Set(['deadline', 'token_budget', 'cost_budget', 'goal_token_budget', 'goal_cost_budget']);

/** The outcome an abort gives: a budget that ran out (deadline, tokens, cost) stops the turn, anything else cancels it. */
export function abortOutcome(reason: string): 'stopped' | 'cancelled' {
  return BUDGET_ABORTS.has(reason) ? 'stopped' : 'cancelled';
}

function completionLimit(context: TurnContext): number {
  return context.maxCompletionRejections ?? DEFAULT_MAX_COMPLETION_REJECTIONS;
}

/** Why the turn failed: the policy, how many answers it refused, what the last one lacked, and that a person decides. */
function exhaustedReason(r: CompletionRefusal, refused: number): string {
  return `${COMPLETION_EXHAUSTED} "${r.policy}" refused ${refused} answer${refused === 1 ? '' : 's'} (the limit): ${r.missing.join('; ')} — a person must decide how to go on`;
}

/** Why the goal is blocked: the policy and what the last refused answer lacked. */
function blockReason(r: CompletionRefusal): string {
  return `${COMPLETION_BLOCK_PREFIX}${r.policy}: ${r.missing.join('; ')}`;
}
