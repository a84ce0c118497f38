import { setup } from 'xstate';
import { slot, type MachineEvent } from './machine-event.js';

/** Input of the attempt machine, taken from `attempt/start`. */
export interface AttemptInput {
  attemptId: string;
  index: number;
  requestDigest: string;
  /** A compaction's summary, not the step's own request (its answer becomes a checkpoint, not an output). */
  kind?: 'compaction';
}

/** Context of the attempt machine. */
export type AttemptContext = AttemptInput;

/** Events the attempt machine reacts to. */
export type AttemptEvent = MachineEvent;

/**
 * One model request: `streaming` (entry asks for `callModel`) → `succeeded | failed |
 * interrupted | aborted`. A `recover` while streaming means the process died mid-request: the
 * attempt is closed as interrupted with its usage settled (`interruptAttempt`); the step decides
 * whether a new attempt follows.
 */
export const attemptMachine = setup({
  types: {} as { context: AttemptContext; events: AttemptEvent; input: AttemptInput },
  actions: {
    callModel: slot<{ attemptId: string; index: number; requestDigest: string; kind?: 'compaction' }>(),
    interruptAttempt: slot<{ attemptId: string }>(),
  },
}).createMachine({
  id: 'attempt',
  initial: 'streaming',
  context: ({ input }) => ({ ...input }),
  states: {
    streaming: {
      entry: { type: 'callModel', params: ({ context }) => ({ ...context }) },
      on: {
        'attempt/end': [
          { guard: ({ event }) => event.data.outcome === 'succeeded', target: 'succeeded' },
          { guard: ({ event }) => event.data.outcome === 'failed', target: 'failed' },
          { guard: ({ event }) => event.data.outcome === 'overflow', target: 'overflow' },
          { guard: ({ event }) => event.data.outcome === 'interrupted', target: 'interrupted' },
          { target: 'aborted' },
        ],
        recover: { actions: { type: 'interruptAttempt', params: ({ context }) => ({ attemptId: context.attemptId }) } },
      },
    },
    succeeded: { type: 'final' },
    failed: { type: 'final' },
    /** The request did not fit the context window; the step decides (compaction, later). */
    overflow: { type: 'final' },
    interrupted: { type: 'final' },
    aborted: { type: 'final' },
  },
});
