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
  /** After a crash mid-call with manual recovery, a person confirms before the turn goes on. */
  confirmUnknown?: boolean;
}

/** Context of the tool-call machine. */
export interface ToolCallContext extends ToolCallInput {
  starts: number;
  /** The open approval request, once `approval/requested` is seen. */
  approvalId: string | null;
  /** Its absolute expiry (ms since epoch): a persisted deadline, re-armed by `tick`. */
  approvalExpiresAt: number | null;
  /** Why the call is denied: the policy's or the person's reason. */
  denyReason: string | null;
  /** Why `reconcile` could not tell whether the call took effect (its answer or error). */
  reconcileReason: string | null;
  /** The observation of a call `reconcile` found applied, until its result is committed. */
  reconciledOutput: string | null;
  /** The turn was aborted (an interrupt) while the call was started: recovery runs nothing again (absent in older snapshots). */
  aborted?: boolean;
}

/** Events the tool-call machine reacts to. */
export type ToolCallEvent = MachineEvent;

type Decided = Extract<MachineEvent, { type: 'policy/decided' }>;

const decision = (value: 'allow' | 'ask' | 'deny') => ({ event }: { event: Decided }) => event.data.decision === value;
function unknownReason(tool: string, reconcile: string | null = null): string {
  const base = `the process stopped after ${tool} started and before its result was recorded; it may or may not have taken effect`;
  // a machine restored from a snapshot written before reconcile existed has no reason at all
  return reconcile ? `${base}; reconcile could not tell: ${reconcile}` : base;
}

type Reconciled = Extract<MachineEvent, { type: 'tool/reconciled' }>;
const verdict = (value: Reconciled['data']['verdict']) => ({ event }: { event: Reconciled }) => event.data.verdict === value;
/** The reason an unknown outcome is committed with: a crash, and what reconcile said when it was asked. */
const unknownOf = ({ context }: { context: ToolCallContext }) => unknownReason(context.name, context.reconcileReason);
/** The question a person confirms an unknown outcome with; it names reconcile's answer when there was one. */
const confirmParams = ({ context }: { context: ToolCallContext }) => ({
  callId: context.callId,
  confirmUnknown: true,
  ...(context.reconcileReason ? { reason: context.reconcileReason } : {}),
});

/** The deny reason an event carries (the policy's or the person's). */
const reasonOf = (event: MachineEvent): string | null =>
  event.type === 'policy/decided' || event.type === 'approval/denied' ? (event.data.reason ?? null) : null;

/**
 * One tool call: `validating → deciding → (awaiting_approval → rechecking) → starting → started
 * → result | denied | cancelled | outcome_unknown`. Invalid calls answer the model with an error
 * observation. An approval is asked for with an absolute expiry; a `tick` past it denies the call.
 * After a grant the policy is evaluated again (`rechecking`): a new deny wins, and an approval
 * that no longer matches the plan asks again. A `recover` in `started` (a crash after
 * `tool/start`, before its end) runs the call again when its semantics say so (no effects, or
 * idempotent); with reconcile semantics it asks the tool (`reconciling`) and follows its
 * committed verdict: applied → result, not applied → run again, unknown → as manual; otherwise
 * the outcome is unknown (after a person confirmed, when `confirmUnknown`).
 */
export const toolCallMachine = setup({
  types: {} as { context: ToolCallContext; events: ToolCallEvent; input: ToolCallInput },
  actions: {
    rejectCall: slot<{ callId: string; error: string }>(),
    decidePolicy: slot<{ callId: string; recheck: boolean }>(),
    requestApproval: slot<{ callId: string; confirmUnknown?: boolean; reason?: string }>(),
    expireApproval: slot<{ callId: string; approvalId: string }>(),
    startTool: slot<{ callId: string; rerun: boolean }>(),
    denyCall: slot<{ callId: string; reason: string }>(),
    cancelCall: slot<{ callId: string; reason: string }>(),
    markOutcomeUnknown: slot<{ callId: string; reason: string }>(),
    reconcileCall: slot<{ callId: string }>(),
    settleReconciled: slot<{ callId: string; output: string }>(),
  },
}).createMachine({
  id: 'tool-call',
  initial: 'validating',
  // Object.assign, not `{ ...input, starts: 0, … }`: that literal takes a slow path in Node 20's V8.
  context: ({ input }) =>
    Object.assign({}, input, {
      starts: 0, approvalId: null, approvalExpiresAt: null, denyReason: null, reconcileReason: null, reconciledOutput: null,
    }),
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
      entry: { type: 'decidePolicy', params: ({ context }) => ({ callId: context.callId, recheck: false }) },
      on: {
        'policy/decided': [
          { guard: decision('allow'), target: 'starting' },
          { guard: decision('ask'), target: 'awaiting_approval' },
          { target: 'denying', actions: assign({ denyReason: ({ event }) => reasonOf(event) }) },
        ],
        recover: { actions: { type: 'decidePolicy', params: ({ context }) => ({ callId: context.callId, recheck: false }) } },
        abort: { target: 'cancelling_abort' },
      },
    },
    awaiting_approval: {
      initial: 'requesting',
      on: {
        'approval/granted': { target: 'rechecking' },
        'approval/denied': { target: 'denying', actions: assign({ denyReason: ({ event }) => reasonOf(event) }) },
        abort: { target: 'cancelling_abort' },
      },
      states: {
        requesting: {
          entry: { type: 'requestApproval', params: ({ context }) => ({ callId: context.callId }) },
          on: {
            'approval/requested': {
              target: 'waiting',
              actions: assign({
                approvalId: ({ event }) => event.data.approvalId,
                approvalExpiresAt: ({ event }) => event.data.expiresAt,
              }),
            },
            recover: { actions: { type: 'requestApproval', params: ({ context }) => ({ callId: context.callId }) } },
          },
        },
        /** Waiting for a person; pending approvals survive a crash (nothing to re-emit on recover). */
        waiting: {
          on: {
            tick: {
              guard: ({ context, event }) => context.approvalExpiresAt !== null && event.nowMs >= context.approvalExpiresAt,
              actions: {
                type: 'expireApproval',
                params: ({ context }) => ({ callId: context.callId, approvalId: context.approvalId! }),
              },
            },
          },
        },
      },
    },
    rechecking: {
      entry: { type: 'decidePolicy', params: ({ context }) => ({ callId: context.callId, recheck: true }) },
      on: {
        'policy/decided': [
          { guard: decision('allow'), target: 'starting' },
          // the approval no longer matches (plan, version, expiry): ask again
          { guard: decision('ask'), target: 'awaiting_approval' },
          { target: 'denying', actions: assign({ denyReason: ({ event }) => reasonOf(event) }) },
        ],
        recover: { actions: { type: 'decidePolicy', params: ({ context }) => ({ callId: context.callId, recheck: true }) } },
        abort: { target: 'cancelling_abort' },
      },
    },
    denying: {
      entry: { type: 'denyCall', params: ({ context }) => ({ callId: context.callId, reason: context.denyReason ?? 'denied by policy' }) },
      on: {
        recover: {
          actions: { type: 'denyCall', params: ({ context }) => ({ callId: context.callId, reason: context.denyReason ?? 'denied by policy' }) },
        },
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
        // the runner's signal stops a call running here; after a crash this says not to run it again
        abort: { actions: assign({ aborted: true }) },
        recover: [
          {
            // no effects: nothing ran that could be unknown, and the interrupted turn runs nothing more
            guard: ({ context }) => context.aborted === true && context.recovery === 'rerun',
            actions: { type: 'cancelCall', params: ({ context }) => ({ callId: context.callId, reason: 'interrupted' }) },
          },
          {
            guard: ({ context }) => context.aborted === true,
            actions: {
              type: 'markOutcomeUnknown',
              params: ({ context }) => ({ callId: context.callId, reason: `${unknownReason(context.name)}; the turn was interrupted, so it is not run again` }),
            },
          },
          {
            guard: ({ context }) => context.recovery === 'rerun' || context.recovery === 'idempotent',
            actions: { type: 'startTool', params: ({ context }) => ({ callId: context.callId, rerun: true }) },
          },
          { guard: ({ context }) => context.recovery === 'reconcile', target: 'reconciling' },
          { guard: ({ context }) => context.confirmUnknown === true, target: 'confirming' },
          { actions: { type: 'markOutcomeUnknown', params: ({ context }) => ({ callId: context.callId, reason: unknownReason(context.name) }) } },
        ],
      },
    },
    /**
     * A crash left the call started and its tool can reconcile: the tool is asked (changing
     * nothing) and its verdict committed as `tool/reconciled` before anything follows from it.
     * A crash before that commit asks again; the verdict is not in the log until it is.
     */
    reconciling: {
      entry: { type: 'reconcileCall', params: ({ context }) => ({ callId: context.callId }) },
      on: {
        'tool/reconciled': [
          { guard: verdict('applied'), target: 'settling', actions: assign({ reconciledOutput: ({ event }) => event.data.output ?? '' }) },
          { guard: verdict('not_applied'), target: 'restarting' },
          {
            guard: ({ context }) => context.confirmUnknown === true,
            target: 'confirming',
            actions: assign({ reconcileReason: ({ event }) => event.data.reason ?? 'no reason given' }),
          },
          { target: 'closing_unknown', actions: assign({ reconcileReason: ({ event }) => event.data.reason ?? 'no reason given' }) },
        ],
        recover: { actions: { type: 'reconcileCall', params: ({ context }) => ({ callId: context.callId }) } },
        // it may have run: an abort cannot call it cancelled
        abort: { target: 'closing_unknown' },
      },
    },
    /** Reconcile found the call applied: its result, with the output reconcile gave, follows. */
    settling: {
      entry: { type: 'settleReconciled', params: ({ context }) => ({ callId: context.callId, output: context.reconciledOutput ?? '' }) },
      on: {
        recover: { actions: { type: 'settleReconciled', params: ({ context }) => ({ callId: context.callId, output: context.reconciledOutput ?? '' }) } },
      },
    },
    /** Reconcile found the call not applied: it runs again under its key, as an idempotent call would. */
    restarting: {
      entry: { type: 'startTool', params: ({ context }) => ({ callId: context.callId, rerun: true }) },
      on: {
        'tool/start': { target: 'started', actions: assign({ starts: ({ context }) => context.starts + 1 }) },
        recover: { actions: { type: 'startTool', params: ({ context }) => ({ callId: context.callId, rerun: true }) } },
        // reconcile said it never took effect, and it has not started again: nothing ran
        abort: { target: 'cancelling_abort' },
      },
    },
    /** Nobody can tell whether the call took effect and no person is asked: the model is told. */
    closing_unknown: {
      entry: { type: 'markOutcomeUnknown', params: ({ context }) => ({ callId: context.callId, reason: unknownOf({ context }) }) },
      on: {
        recover: { actions: { type: 'markOutcomeUnknown', params: ({ context }) => ({ callId: context.callId, reason: unknownOf({ context }) }) } },
      },
    },
    /** The outcome is unknown and the turn waits for a person before the model hears of it. */
    confirming: {
      initial: 'requesting',
      on: {
        'approval/granted': {
          actions: {
            type: 'markOutcomeUnknown',
            params: ({ context }) => ({ callId: context.callId, reason: `${unknownOf({ context })}; a person checked and let the turn go on` }),
          },
        },
        'approval/denied': {
          actions: {
            type: 'markOutcomeUnknown',
            params: ({ context, event }) => ({ callId: context.callId, reason: `${unknownOf({ context })}; ${event.data.reason ?? 'a person answered no'}` }),
          },
        },
        // it may have run: an abort cannot call it cancelled
        abort: {
          actions: { type: 'markOutcomeUnknown', params: ({ context }) => ({ callId: context.callId, reason: unknownOf({ context }) }) },
        },
      },
      states: {
        requesting: {
          entry: { type: 'requestApproval', params: confirmParams },
          on: {
            'approval/requested': {
              target: 'waiting',
              actions: assign({
                approvalId: ({ event }) => event.data.approvalId,
                approvalExpiresAt: ({ event }) => event.data.expiresAt,
              }),
            },
            recover: { actions: { type: 'requestApproval', params: confirmParams } },
          },
        },
        waiting: {
          on: {
            tick: {
              guard: ({ context, event }) => context.approvalExpiresAt !== null && event.nowMs >= context.approvalExpiresAt,
              actions: {
                type: 'expireApproval',
                params: ({ context }) => ({ callId: context.callId, approvalId: context.approvalId! }),
              },
            },
          },
        },
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
