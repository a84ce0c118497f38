import { assign, setup } from 'xstate';
import { slot, type MachineEvent } from './machine-event.js';

/** How a started call may be recovered; mirrors the tool's execution semantics. */
export type CallRecovery = 'rerun' | 'idempotent' | 'reconcile' | 'manual';

/** Input of the tool-call machine, taken from `tool/call`. */
export interface ToolCallInput {
  callId: string;
  name: string;
  /** Whether the call was resolved to a visible tool with valid arguments. */
  valid: boolean;
  error: string | null;
  recovery: CallRecovery;
  /** False when the turn's tool budget is spent: the call is cancelled, never started. */
  withinBudget: boolean;
}

/** Context of the tool-call machine. */
export interface ToolCallContext extends ToolCallInput {
  starts: number;
}

/** Events the tool-call machine reacts to. */
export type ToolCallEvent = MachineEvent;

/**
 * One tool call: `validating → deciding → (awaiting_approval → rechecking) → starting → started
 * → result | denied | cancelled | outcome_unknown`. Invalid calls answer the model with an error
 * observation. A `recover` in `started` (a crash after `tool/start`, before its end) runs the
 * call again only when its semantics say so; otherwise the outcome is unknown.
 */
export const toolCallMachine = setup({
  types: {} as { context: ToolCallContext; events: ToolCallEvent; input: ToolCallInput },
  actions: {
    rejectCall: slot<{ callId: string; error: string }>(),
    decidePolicy: slot<{ callId: string }>(),
    startTool: slot<{ callId: string; rerun: boolean }>(),
    denyCall: slot<{ callId: string; reason: string }>(),
    cancelCall: slot<{ callId: string; reason: string }>(),
    markOutcomeUnknown: slot<{ callId: string; reason: string }>(),
  },
}).createMachine({
  id: 'tool-call',
  initial: 'validating',
  context: ({ input }) => ({ ...input, starts: 0 }),
  on: {
    'tool/result': { target: '.result' },
    'tool/denied': { target: '.denied' },
    'tool/cancelled': { target: '.cancelled' },
    'tool/outcome_unknown': { target: '.outcome_unknown' },
  },
  states: {
    validating: {
      always: [
        {
          guard: ({ context }) => !context.valid,
          target: 'rejecting',
        },
        { guard: ({ context }) => !context.withinBudget, target: 'cancelling' },
        { target: 'deciding' },
      ],
    },
    rejecting: {
      entry: { type: 'rejectCall', params: ({ context }) => ({ callId: context.callId, error: context.error ?? 'invalid call' }) },
      on: {
        recover: {
          actions: { type: 'rejectCall', params: ({ context }) => ({ callId: context.callId, error: context.error ?? 'invalid call' }) },
        },
      },
    },
    cancelling: {
      entry: { type: 'cancelCall', params: ({ context }) => ({ callId: context.callId, reason: 'tool_budget' }) },
      on: {
        recover: { actions: { type: 'cancelCall', params: ({ context }) => ({ callId: context.callId, reason: 'tool_budget' }) } },
      },
    },
    deciding: {
      entry: { type: 'decidePolicy', params: ({ context }) => ({ callId: context.callId }) },
      on: {
        'policy/decided': [
          { guard: ({ event }) => event.data.decision === 'allow', target: 'starting' },
          { guard: ({ event }) => event.data.decision === 'ask', target: 'awaiting_approval' },
          { target: 'denying' },
        ],
        recover: { actions: { type: 'decidePolicy', params: ({ context }) => ({ callId: context.callId }) } },
        abort: { target: 'cancelling_abort' },
      },
    },
    /** Approvals arrive with the tool pipeline issue; the state exists so the shape is final. */
    awaiting_approval: {
      on: {
        'approval/granted': { target: 'rechecking' },
        'approval/denied': { target: 'denied' },
      },
    },
    rechecking: {
      entry: { type: 'decidePolicy', params: ({ context }) => ({ callId: context.callId }) },
      on: {
        'policy/decided': [
          { guard: ({ event }) => event.data.decision === 'allow', target: 'starting' },
          { target: 'denying' },
        ],
      },
    },
    denying: {
      entry: { type: 'denyCall', params: ({ context }) => ({ callId: context.callId, reason: 'denied by policy' }) },
      on: {
        recover: { actions: { type: 'denyCall', params: ({ context }) => ({ callId: context.callId, reason: 'denied by policy' }) } },
      },
    },
    starting: {
      entry: { type: 'startTool', params: ({ context }) => ({ callId: context.callId, rerun: false }) },
      on: {
        'tool/start': { target: 'started', actions: assign({ starts: ({ context }) => context.starts + 1 }) },
        recover: { actions: { type: 'startTool', params: ({ context }) => ({ callId: context.callId, rerun: false }) } },
        abort: { target: 'cancelling_abort' },
      },
    },
    started: {
      on: {
        'tool/start': { actions: assign({ starts: ({ context }) => context.starts + 1 }) },
        recover: [
          {
            guard: ({ context }) => context.recovery === 'rerun' || context.recovery === 'idempotent',
            actions: { type: 'startTool', params: ({ context }) => ({ callId: context.callId, rerun: true }) },
          },
          {
            actions: {
              type: 'markOutcomeUnknown',
              params: ({ context }) => ({
                callId: context.callId,
                reason: `the process stopped after ${context.name} started and before its result was recorded; it may or may not have taken effect`,
              }),
            },
          },
        ],
      },
    },
    cancelling_abort: {
      entry: { type: 'cancelCall', params: ({ context }) => ({ callId: context.callId, reason: 'aborted' }) },
      on: {
        recover: { actions: { type: 'cancelCall', params: ({ context }) => ({ callId: context.callId, reason: 'aborted' }) } },
      },
    },
    result: { type: 'final' },
    denied: { type: 'final' },
    cancelled: { type: 'final' },
    outcome_unknown: { type: 'final' },
  },
});
