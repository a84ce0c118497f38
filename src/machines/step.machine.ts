import { assign, setup } from 'xstate';
import type { EventData } from '../protocol/events.js';
import type { ToolCallRequest } from '../protocol/history.js';
import { eventTimeMs, slot, type MachineEvent } from './machine-event.js';
import { abortOutcome } from './turn.machine.js';

/** Error classes of a stream cut at its reservation's output room (a turn's or a goal's budget): the turn stops on it. */
const BUDGET_CUTS: ReadonlySet<string> = new Set(['token_budget', 'cost_budget', 'goal_token_budget', 'goal_cost_budget']);

/** Input of the step machine, taken from `step/start` and the turn's budgets. */
export interface StepInput {
  stepId: string;
  index: number;
  maxAttempts: number;
  /** Tool calls the turn may still start; calls beyond it are cancelled. Null: no limit. */
  toolBudgetLeft: number | null;
}

/** Params of the `endStep` effect: what `step/end` records. */
export type EndStepParams = EventData<'step/end'>;

/** Context of the step machine. */
export interface StepContext {
  stepId: string;
  index: number;
  maxAttempts: number;
  toolBudgetLeft: number | null;
  attempts: number;
  /** Absolute time before which the next attempt must not start (retry backoff). */
  retryAt: number | null;
  expectedCalls: number;
  calls: ToolCallRequest[];
  registered: number;
  ended: number;
  ending: EndStepParams | null;
  /** Why the turn's work was aborted while the step's calls ran (absent: it was not). */
  abortReason?: string;
}

/** Events the step machine reacts to. */
export type StepEvent = MachineEvent;

type Accepted = Extract<MachineEvent, { type: 'assistant/accepted' }>;

function answerOutcome(e: Accepted): EndStepParams {
  const { content, finishReason } = e.data;
  switch (finishReason) {
    case 'length':
      return { outcome: 'stopped', reason: 'max_output_tokens', toolCalls: 0 };
    case 'content_filter':
      return { outcome: 'stopped', reason: 'content_filter', toolCalls: 0 };
    case 'refusal':
      return { outcome: 'stopped', reason: 'refusal', toolCalls: 0 };
    case 'error':
      return { outcome: 'failed', reason: 'model_error', toolCalls: 0 };
    case 'stop':
    case 'tool_calls':
      return content !== null && content.trim() !== ''
        ? { outcome: 'final', reason: null, toolCalls: 0 }
        : { outcome: 'failed', reason: 'empty_answer', toolCalls: 0 };
  }
}

const TOOL_ENDS = ['tool/result', 'tool/denied', 'tool/cancelled', 'tool/outcome_unknown'] as const;

/** The ending of a step whose request cannot be made to fit (a rejection that ends it). */
function cannotFit(message: string): EndStepParams {
  return { outcome: 'failed', reason: `context_cannot_fit: ${message}`, toolCalls: 0 };
}

/**
 * A Step: `assembling` (the request is prepared; when it would not fit, or a person asked, a
 * compaction starts) → `compacting` (one summary attempt, then a checkpoint or a rejection; back
 * to `assembling` with the request revision one more) → `generating` (at most one open Attempt;
 * retries wait until an absolute `retryAt`) → `accepting` → `tools` (every call of the accepted
 * output reaches an end) → `ending` → `done`.
 */
export const stepMachine = setup({
  types: {} as { context: StepContext; events: StepEvent; input: StepInput },
  actions: {
    prepareRequest: slot<{ index: number }>(),
    compact: slot<{ index: number }>(),
    startAttempt: slot<{ index: number; notBeforeMs: number | null }>(),
    dispatchCalls: slot<{ calls: ToolCallRequest[]; toolBudgetLeft: number | null }>(),
    endStep: slot<EndStepParams>(),
  },
}).createMachine({
  id: 'step',
  initial: 'assembling',
  // Named one by one: an object literal that starts with a spread and adds properties after it
  // takes a slow path in Node 20's V8, paid for every added property.
  context: ({ input }) => ({
    stepId: input.stepId,
    index: input.index,
    maxAttempts: input.maxAttempts,
    toolBudgetLeft: input.toolBudgetLeft,
    attempts: 0,
    retryAt: null,
    expectedCalls: 0,
    calls: [],
    registered: 0,
    ended: 0,
    ending: null,
  }),
  on: {
    'step/end': { target: '.done' },
  },
  states: {
    assembling: {
      entry: { type: 'prepareRequest', params: ({ context }) => ({ index: context.index }) },
      on: {
        'request/prepared': { target: 'generating' },
        'compaction/started': { target: 'compacting' },
        // no compaction could start (nothing closed to compact, the fixed parts alone too large, the revision limit)
        'compaction/rejected': {
          guard: ({ event }) => event.data.endsStep,
          target: 'ending',
          actions: assign({ ending: ({ event }) => cannotFit(event.data.message) }),
        },
        recover: { actions: { type: 'prepareRequest', params: ({ context }) => ({ index: context.index }) } },
        abort: { target: 'ending', actions: assign({ ending: ({ event }) => stopped(event.reason) }) },
      },
    },
    compacting: {
      // starts the summary's attempt (the attempt machine runs it); on recover, once the open one is closed
      entry: { type: 'compact', params: ({ context }) => ({ index: context.index }) },
      on: {
        'checkpoint/committed': { target: 'assembling' },
        'compaction/rejected': [
          { guard: ({ event }) => event.data.endsStep, target: 'ending', actions: assign({ ending: ({ event }) => cannotFit(event.data.message) }) },
          { target: 'assembling' },
        ],
        // an attempt closed as interrupted (its process died): the summary is asked for again
        'attempt/end': [
          { guard: ({ event }) => event.data.outcome === 'interrupted', target: 'compacting', reenter: true },
          // a retryable failure with attempts left: asked again after its backoff (no rejection came with it)
          { guard: ({ event }) => event.data.outcome === 'failed' && event.data.backoffMs !== null, target: 'compacting', reenter: true },
          // the turn was interrupted while the summary streamed
          { guard: ({ event }) => event.data.outcome === 'aborted', target: 'ending', actions: assign({ ending: ({ event }) => stopped(event.data.error?.message ?? 'cancelled') }) },
        ],
        recover: { actions: { type: 'compact', params: ({ context }) => ({ index: context.index }) } },
        abort: { target: 'ending', actions: assign({ ending: ({ event }) => stopped(event.reason) }) },
      },
    },
    generating: {
      initial: 'launching',
      states: {
        launching: {
          entry: { type: 'startAttempt', params: ({ context }) => nextAttempt(context) },
          on: {
            'attempt/start': {
              target: 'attempting',
              actions: assign({ attempts: ({ context }) => context.attempts + 1, retryAt: null }),
            },
            recover: { actions: { type: 'startAttempt', params: ({ context }) => nextAttempt(context) } },
            abort: { target: '#step.ending', actions: assign({ ending: ({ event }) => stopped(event.reason) }) },
          },
        },
        attempting: {
          on: {
            'attempt/end': [
              { guard: ({ event }) => event.data.outcome === 'succeeded', target: '#step.accepting' },
              {
                // the stream ran past its budget reservation and was cut: the turn stops on that budget
                guard: ({ event }) => BUDGET_CUTS.has(event.data.error?.class ?? ''),
                target: '#step.ending',
                actions: assign({ ending: ({ event }) => stopped(event.data.error!.class) }),
              },
              {
                guard: ({ event }) => event.data.outcome === 'interrupted',
                target: 'launching',
                reenter: true,
              },
              {
                guard: ({ context, event }) =>
                  event.data.outcome === 'failed' &&
                  event.data.error !== null &&
                  event.data.error.retryable &&
                  context.attempts < context.maxAttempts,
                target: 'launching',
                reenter: true,
                actions: assign({ retryAt: ({ event }) => eventTimeMs(event) + (event.data.backoffMs ?? 0) }),
              },
              {
                // the request did not fit (known before the send, or the provider said so): assemble
                // it again, which compacts (or ends the step context_cannot_fit)
                guard: ({ event }) => event.data.outcome === 'overflow',
                target: '#step.assembling',
              },
              {
                guard: ({ event }) => event.data.outcome === 'aborted',
                target: '#step.ending',
                actions: assign({ ending: ({ event }) => stopped(event.data.error?.message ?? 'cancelled') }),
              },
              {
                target: '#step.ending',
                actions: assign({
                  ending: ({ event }) => ({
                    outcome: 'failed' as const,
                    reason: event.data.error
                      ? `model ${event.data.error.class} error: ${event.data.error.message}`
                      : 'model attempt failed',
                    toolCalls: 0,
                  }),
                }),
              },
            ],
          },
        },
      },
    },
    accepting: {
      on: {
        'assistant/accepted': [
          {
            guard: ({ event }) => event.data.toolCalls.length > 0,
            target: 'tools',
            actions: assign({
              calls: ({ event }) => event.data.toolCalls,
              expectedCalls: ({ event }) => event.data.toolCalls.length,
            }),
          },
          { target: 'ending', actions: assign({ ending: ({ event }) => answerOutcome(event) }) },
        ],
        // the answer failed validation (structured output): the turn decides whether to ask again
        'assistant/rejected': {
          target: 'ending',
          actions: assign({ ending: ({ event }) => ({ outcome: 'rejected' as const, reason: event.data.reason, toolCalls: 0 }) }),
        },
      },
    },
    tools: {
      entry: {
        type: 'dispatchCalls',
        params: ({ context }) => ({ calls: context.calls, toolBudgetLeft: context.toolBudgetLeft }),
      },
      always: {
        guard: ({ context }) => context.ended >= context.expectedCalls,
        target: 'ending',
        actions: assign({
          // an interrupt while tools ran: the step is cancelled once every call has ended
          ending: ({ context }) =>
            context.abortReason === undefined
              ? { outcome: 'tool_calls' as const, reason: null, toolCalls: context.expectedCalls }
              : { outcome: abortOutcome(context.abortReason), reason: context.abortReason, toolCalls: context.expectedCalls },
        }),
      },
      on: {
        abort: { actions: assign({ abortReason: ({ event }) => event.reason }) },
        'tool/call': { actions: assign({ registered: ({ context }) => context.registered + 1 }) },
        ...Object.fromEntries(
          TOOL_ENDS.map((t) => [t, { actions: assign({ ended: ({ context }: { context: StepContext }) => context.ended + 1 }) }]),
        ),
        recover: {
          actions: {
            type: 'dispatchCalls',
            params: ({ context }) => ({ calls: context.calls, toolBudgetLeft: context.toolBudgetLeft }),
          },
        },
      },
    },
    ending: {
      entry: { type: 'endStep', params: ({ context }) => context.ending! },
      on: { recover: { actions: { type: 'endStep', params: ({ context }) => context.ending! } } },
    },
    done: { type: 'final' },
  },
});

function stopped(reason: string): EndStepParams {
  return { outcome: abortOutcome(reason), reason, toolCalls: 0 };
}

function nextAttempt(context: StepContext) {
  return { index: context.attempts + 1, notBeforeMs: context.retryAt };
}
