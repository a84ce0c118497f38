import { constants } from 'node:os';

/**
 * SIGTERM and SIGHUP stop a command the way a kill would leave its work, but tidily: what it
 * started is stopped (the embedded nats-server, the agents it hosts, its children) and a turn it
 * hosts is released, not cancelled, so `actorloop resume` carries it on. Ctrl-C is different: it
 * asks to cancel the turn. Without a listener Node would die on the spot and leave the embedded
 * server running with no owner.
 *
 * Signals belong to the process, and so does this state: `catchStopSignals` installs it for the
 * run of one command (main), and the places that wait (a turn, a follower, a host, a chaos
 * session) hear of it through `onStop`.
 */
export const STOP_SIGNALS = ['SIGTERM', 'SIGHUP'] as const;
/** A signal that stops a command, leaving its turn resumable. */
export type StopSignal = (typeof STOP_SIGNALS)[number];

/** The exit code of a command a signal stopped, as a shell reports one: 128 + its number (143, 129). */
export function exitCodeForSignal(signal: StopSignal): number {
  return 128 + constants.signals[signal];
}

interface Caught {
  received: StopSignal | null;
  listeners: Set<(signal: StopSignal) => void>;
}

let caught: Caught | null = null;

/** Where signals come from: the process, or an emitter in a test. */
export type SignalSource = Pick<NodeJS.EventEmitter, 'on' | 'off'>;

/**
 * Catches the stop signals until the returned function is called. The first tells every `onStop`
 * listener (and one registered later at once); a second leaves at once with its exit code, as a
 * second Ctrl-C does.
 */
export function catchStopSignals(
  leaveNow: (code: number) => void = (code) => process.exit(code),
  source: SignalSource = process,
): () => void {
  const state: Caught = { received: null, listeners: new Set() };
  caught = state;
  const handlers = STOP_SIGNALS.map((signal) => {
    const handler = (): void => {
      if (state.received !== null) return leaveNow(exitCodeForSignal(signal));
      state.received = signal;
      for (const fn of [...state.listeners]) fn(signal);
      state.listeners.clear();
    };
    source.on(signal, handler);
    return { signal, handler };
  });
  return () => {
    for (const { signal, handler } of handlers) source.off(signal, handler);
    if (caught === state) caught = null;
  };
}

/** The stop signal this command received, or null. */
export function stopReceived(): StopSignal | null {
  return caught?.received ?? null;
}

/**
 * Calls `fn` once when a stop signal arrives (on the next microtask when one already did);
 * returns a function that removes it. Outside `catchStopSignals` (a library caller) it never fires.
 */
export function onStop(fn: (signal: StopSignal) => void): () => void {
  const state = caught;
  if (!state) return () => {};
  if (state.received !== null) {
    const signal = state.received;
    let removed = false;
    queueMicrotask(() => removed || fn(signal));
    return () => (removed = true);
  }
  state.listeners.add(fn);
  return () => state.listeners.delete(fn);
}

/** `onStop` as a promise for a race, with the function that removes its listener. */
export function whenStopped(): { stopped: Promise<StopSignal>; dispose: () => void } {
  let dispose = (): void => {};
  const stopped = new Promise<StopSignal>((resolve) => {
    const off = onStop(resolve);
    dispose = () => void off();
  });
  return { stopped, dispose };
}

/**
 * For a long-running command (`host`, `serve`): resolves with the signal that asks it to stop —
 * a stop signal, or Ctrl-C (SIGINT) — and `dispose` removes both listeners.
 */
export function whenAskedToStop(): { stopped: Promise<string>; dispose: () => void } {
  let dispose = (): void => {};
  const stopped = new Promise<string>((resolve) => {
    const off = onStop(resolve);
    const onSigint = (): void => resolve('SIGINT');
    process.once('SIGINT', onSigint);
    dispose = () => {
      off();
      process.off('SIGINT', onSigint);
    };
  });
  return { stopped, dispose };
}
