import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, test } from 'vitest';
import { catchStopSignals, exitCodeForSignal, onStop, stopReceived, whenStopped } from '../../src/cli/stop-signals.js';

// signals come from an emitter here: emitting SIGTERM on the test process would reach the runner
let release = (): void => {};
afterEach(() => release());

describe('stop signals', () => {
  test('exit codes are 128 + the signal number', () => {
    expect(exitCodeForSignal('SIGTERM')).toBe(143);
    expect(exitCodeForSignal('SIGHUP')).toBe(129);
  });

  test('the first signal tells the listeners, once; a second leaves at once with its code', () => {
    const source = new EventEmitter();
    const left: number[] = [];
    release = catchStopSignals((code) => left.push(code), source);
    const heard: string[] = [];
    onStop((s) => heard.push(s));
    const off = onStop((s) => heard.push(`removed ${s}`));
    off();
    source.emit('SIGHUP');
    expect(heard).toEqual(['SIGHUP']);
    expect(stopReceived()).toBe('SIGHUP');
    expect(left).toEqual([]);
    source.emit('SIGTERM');
    expect(left).toEqual([143]);
    expect(heard).toEqual(['SIGHUP']);
  });

  test('a listener registered after the signal hears it at once; none fires once released', async () => {
    const source = new EventEmitter();
    release = catchStopSignals(() => {}, source);
    source.emit('SIGTERM');
    await expect(whenStopped().stopped).resolves.toBe('SIGTERM');
    release();
    expect(source.listenerCount('SIGTERM')).toBe(0);
    expect(stopReceived()).toBeNull();
    let fired = false;
    onStop(() => (fired = true));
    await Promise.resolve();
    expect(fired).toBe(false);
  });
});
