// The completion verdict on facts the projection folds from log events (the same fold a
// rehydrated agent and `verify` run): evidence from reads, search hits and artifacts; changes and
// verifications by seq, with shell counted conservatively.
import { describe, expect, it } from 'vitest';
import { completionMissing } from '../../src/store/completion-check.js';
import type { ActorEvent, EventData, TurnSettings } from '../../src/protocol/events.js';
import { emptyProjection, foldEvent, type Projection } from '../../src/store/projection.js';
import { ev } from '../machines/events.js';

const SETTINGS: TurnSettings = {
  model: 'scripted', baseUrl: null, workspace: '/ws', tools: ['read_file', 'search', 'shell', 'write_file'], instructions: 'x',
  budgets: { maxSteps: 10, maxToolCalls: null, deadlineAt: null }, maxAttempts: 3,
};

class Log {
  readonly p: Projection = emptyProjection('agt_1');
  private seq = 0;
  private calls = 0;
  constructor(settings: Partial<TurnSettings>) {
    this.add(ev('turn/start', { source: 'user_message', messageIds: [], settings: { ...SETTINGS, ...settings } }, { seq: ++this.seq, turn: 't1' }));
    this.add(ev('step/start', { index: 1, maxAttempts: 3, toolBudgetLeft: null, model: 'scripted', maxOutputTokens: null }, { seq: ++this.seq, turn: 't1', step: 's1' }));
  }
  add(e: ActorEvent): this {
    foldEvent(this.p, e);
    return this;
  }
  /** One call from tool/call to its result; `verification` as policy/decided would record it. */
  call(name: string, args: Record<string, unknown>, result: Partial<EventData<'tool/result'>> & { ok: boolean }, opts: { effects?: 'none' | 'possible'; verification?: boolean } = {}): this {
    const call = `c${++this.calls}`;
    const scope = { turn: 't1', step: 's1', call };
    const effects = opts.effects ?? 'none';
    this.add(ev('tool/call', { index: 0, providerId: call, name, arguments: JSON.stringify(args), status: 'valid', error: null, effects, recovery: 'rerun', withinBudget: true }, { seq: ++this.seq, ...scope }));
    this.add(ev('policy/decided', { decision: 'allow', rule: 'r', reason: null, ...(opts.verification ? { verification: true } : {}) }, { seq: ++this.seq, ...scope }));
    this.add(ev('tool/start', { name, input: args, effects, idempotencyKey: 'k', rerun: false }, { seq: ++this.seq, ...scope }));
    this.add(ev('tool/result', { output: '', error: null, durationMs: 1, ...result }, { seq: ++this.seq, ...scope }));
    return this;
  }
  missing(answer: string): string[] {
    return completionMissing(this.p.openTurn!.settings, this.p.completion, answer);
  }
}

describe('cited', () => {
  it('accepts citations of files read, search hits and artifacts; names each that was not retrieved', () => {
    const log = new Log({ completeWhen: 'cited' })
      .call('read_file', { path: './README.md' }, { ok: true, output: '# readme' })
      .call('search', { pattern: 'slug' }, { ok: true, output: 'src/slug.js:2: return s\ntest/slug.test.js:5: slugify(' })
      .call('shell', { command: 'cat big.log' }, { ok: true, output: 'preview', artifact: { id: 'art_0Q2V8M4K7T9H3C6X1B5N8R2W4Z', digest: 'd', bytes: 9, binary: false } }, { effects: 'possible' });
    expect(log.missing('[README.md] [src/slug.js:2] [/ws/test/slug.test.js] [art_0Q2V8M4K7T9H3C6X1B5N8R2W4Z]')).toEqual([]);
    expect(log.missing('[README.md] [docs/x.md] [src/other.js]')).toEqual([
      expect.stringContaining('[docs/x.md]'),
      expect.stringContaining('[src/other.js]'),
    ]);
  });

  it('a failed read is no evidence, and an answer citing nothing is refused', () => {
    const log = new Log({ completeWhen: 'cited' }).call('read_file', { path: 'gone.md' }, { ok: false, output: 'not found' });
    expect(log.missing('see [gone.md]')).toEqual([expect.stringContaining('[gone.md]')]);
    expect(log.missing('no citations here')).toEqual([expect.stringContaining('cites no evidence')]);
  });

  it('evidence outlives the turn: a later turn of the session may cite it', () => {
    const log = new Log({ completeWhen: 'cited' }).call('read_file', { path: 'a.md' }, { ok: true, output: 'a' });
    log.add(ev('step/end', { outcome: 'final', reason: null, toolCalls: 0 }, { seq: 100, turn: 't1' }));
    log.add(ev('turn/end', { outcome: 'completed', reason: null, answer: 'x', steps: 1, toolCalls: 1, usage: { inputTokens: 0, outputTokens: 0, estimated: false } }, { seq: 101, turn: 't1' }));
    log.add(ev('turn/start', { source: 'follow_up', messageIds: [], settings: { ...SETTINGS, completeWhen: 'cited' } }, { seq: 102, turn: 't2' }));
    expect(log.missing('[a.md]')).toEqual([]);
  });
});

describe('code-change', () => {
  const settings = { completeWhen: 'code-change' as const, verifyCommands: ['npm test'] };
  const write = (log: Log, ok = true) => log.call('write_file', { path: 'a.js', content: 'x' }, { ok, output: ok ? 'wrote' : 'refused' }, { effects: 'possible' });
  const verify = (log: Log, ok: boolean) => log.call('shell', { command: 'npm test' }, { ok, output: ok ? 'exit code 0' : 'exit code 1' }, { effects: 'possible', verification: true });

  it('nothing changed: complete', () => {
    expect(new Log(settings).call('read_file', { path: 'a.js' }, { ok: true, output: 'x' }).missing('done')).toEqual([]);
  });

  it('a change with no verification, or only a failing one, is refused; a passing one after it completes', () => {
    const log = write(new Log(settings));
    expect(log.missing('done')).toEqual([expect.stringContaining('no verification passed in this turn: run `npm test`')]);
    verify(log, false);
    expect(log.missing('done')).toHaveLength(1);
    verify(log, true);
    expect(log.missing('done')).toEqual([]);
  });

  it('a change after the last passing verification needs another', () => {
    const log = verify(write(new Log(settings)), true);
    write(log);
    expect(log.missing('done')).toEqual([expect.stringContaining('files changed after the last verification that passed')]);
  });

  it('any effectful shell call counts as a change, even a failing one; a refused write_file does not', () => {
    const shell = verify(write(new Log(settings)), true).call('shell', { command: 'touch x' }, { ok: false, output: 'exit code 1' }, { effects: 'possible' });
    expect(shell.missing('done')).toHaveLength(1);
    expect(write(new Log(settings), false).missing('done')).toEqual([]);
  });

  it('a verification counts only for changes that ended before it started', () => {
    const log = new Log(settings);
    const at = (seq: number, call: string) => ({ seq, turn: 't1', step: 's1', call });
    // the test run starts, a write lands while it runs, then the run passes
    log.add(ev('tool/call', { index: 0, providerId: 'v', name: 'shell', arguments: '{"command":"npm test"}', status: 'valid', error: null, effects: 'possible', recovery: 'manual', withinBudget: true }, at(10, 'v')));
    log.add(ev('policy/decided', { decision: 'allow', rule: 'r', reason: null, verification: true }, at(11, 'v')));
    log.add(ev('tool/call', { index: 1, providerId: 'w', name: 'write_file', arguments: '{"path":"a.js","content":"x"}', status: 'valid', error: null, effects: 'possible', recovery: 'reconcile', withinBudget: true }, at(12, 'w')));
    log.add(ev('tool/start', { name: 'shell', input: {}, effects: 'possible', idempotencyKey: 'k1', rerun: false }, at(13, 'v')));
    log.add(ev('tool/start', { name: 'write_file', input: {}, effects: 'possible', idempotencyKey: 'k2', rerun: false }, at(14, 'w')));
    log.add(ev('tool/result', { ok: true, output: 'wrote', error: null, durationMs: 1 }, at(15, 'w')));
    log.add(ev('tool/result', { ok: true, output: 'exit code 0', error: null, durationMs: 1 }, at(16, 'v')));
    expect(log.missing('done')).toHaveLength(1);
  });

  it('an effectful call whose outcome is unknown counts as a change', () => {
    const log = verify(new Log(settings), true);
    log.add(ev('tool/call', { index: 0, providerId: 'p', name: 'apply_patch', arguments: '{}', status: 'valid', error: null, effects: 'possible', recovery: 'manual', withinBudget: true }, { seq: 50, turn: 't1', step: 's1', call: 'p' }));
    log.add(ev('tool/start', { name: 'apply_patch', input: {}, effects: 'possible', idempotencyKey: 'k', rerun: false }, { seq: 51, turn: 't1', step: 's1', call: 'p' }));
    log.add(ev('tool/outcome_unknown', { reason: 'crash' }, { seq: 52, turn: 't1', step: 's1', call: 'p' }));
    expect(log.missing('done')).toHaveLength(1);
  });

  it('a new turn starts with no changes', () => {
    const log = write(new Log(settings));
    log.add(ev('turn/start', { source: 'follow_up', messageIds: [], settings: { ...SETTINGS, ...settings } }, { seq: 200, turn: 't2' }));
    expect(log.missing('done')).toEqual([]);
  });
});

describe('answer', () => {
  it('never refuses', () => {
    expect(new Log({}).call('write_file', { path: 'a' }, { ok: true, output: '' }, { effects: 'possible' }).missing('[made-up.md]')).toEqual([]);
  });
});
