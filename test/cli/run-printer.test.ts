// RunPrinter: a person's messages and an interrupt as short notes on stderr; on a terminal the model's
// text streamed from live deltas (never twice), calls and results in brief, a status line whose clock
// stops while a person decides; without one a line per event naming its tools; --quiet: nothing. Notes
// go to stderr as the log commits each delivery state (stdout keeps the run's own lines).
import { PassThrough } from 'node:stream';
import { describe, expect, test } from 'vitest';
import { RunPrinter } from '../../src/cli/run-printer.js';
import { LogBuilder } from '../actors/log-builder.js';
import { emptyProjection, foldEvent } from '../../src/store/projection.js';

describe('RunPrinter: a person\'s messages', () => {

  test('pending on inbox/received, included in the step whose request names it, cancelled with its reason; other kinds say nothing', () => {
    const stdout = Object.assign(new PassThrough(), { isTTY: false });
    const stderr = new PassThrough();
    let err = '';
    stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
    const p = new RunPrinter({ stdout, stderr }, false);
    const b = new LogBuilder();
    b.push('inbox/received', { messageId: 'msg_A', kind: 'steer', from: 'client:cli', content: 'go left', request: null });
    b.push('inbox/received', { messageId: 'msg_B', kind: 'follow_up', from: 'client:cli', content: 'then this', request: null });
    b.push('inbox/received', { messageId: 'msg_C', kind: 'approval_response', from: 'client:cli', content: '{}', request: null });
    b.push('step/start', { index: 3, maxAttempts: 1, toolBudgetLeft: null, model: 'm', maxOutputTokens: null, messageIds: ['msg_A'] }, { turn: 'turn_1', step: 'step_3' });
    b.push('request/prepared', { digest: 'sha256:x', bytes: 1, messages: 2, messageIds: ['msg_A'] }, { turn: 'turn_1', step: 'step_3' });
    b.push('inbox/cancelled', { messageId: 'msg_B', reason: 'interrupted: follow-ups cancelled' });
    b.push('interrupt/requested', { messageId: 'msg_D', by: 'client:cli', followUps: 'cancel' }, { turn: 'turn_1' });
    p.commit(b.events);
    expect(err.trimEnd().split('\n')).toEqual([
      '› steer msg_A pending',
      '› follow-up msg_B pending',
      '› steer msg_A included in step 3',
      '› follow-up msg_B cancelled (interrupted: follow-ups cancelled)',
      'interrupt requested by client:cli · follow-ups cancelled',
    ]);
  });

  test('a recovery that closed nothing says what goes on, not that nothing was open', () => {
    const stdout = Object.assign(new PassThrough(), { isTTY: false });
    const stderr = new PassThrough();
    let err = '';
    stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
    const p = new RunPrinter({ stdout, stderr }, false);
    const b = new LogBuilder();
    b.push('recovery/continuation', { closed: [], resume: 'step' }, { turn: 'turn_1' });
    b.push('recovery/continuation', { closed: [], resume: 'none' });
    p.commit(b.events);
    expect(err.trimEnd().split('\n')).toEqual(['recovered: nothing had to be closed; the open step goes on', 'recovered: nothing was open']);
  });
});

/** A printer over captured streams; `tty` makes stdout a terminal. */
function capture(tty: boolean, extra: { quiet?: boolean } = {}) {
  const stdout = Object.assign(new PassThrough(), { isTTY: tty });
  const stderr = Object.assign(new PassThrough(), { isTTY: tty });
  const got = { out: '', err: '' };
  stdout.setEncoding('utf8').on('data', (s: string) => (got.out += s));
  stderr.setEncoding('utf8').on('data', (s: string) => (got.err += s));
  const printer = new RunPrinter({ stdout, stderr, ...extra }, false);
  return { printer, got };
}

/** What a terminal shows of `raw`: each line as it was last drawn (a status line cleared by `\r\x1b[2K` is gone). */
function screen(raw: string): string[] {
  const rows: string[] = [''];
  for (const part of raw.split(/(\r\x1b\[2K|\n)/)) {
    if (part === '\n') rows.push('');
    else if (part === '\r\x1b[2K') rows[rows.length - 1] = '';
    else rows[rows.length - 1] += part;
  }
  return rows;
}

/** One step: text, one read_file call and its result; then a final answer. */
function demoTurn(): LogBuilder {
  const b = new LogBuilder();
  b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt();
  b.push('assistant/accepted', { content: 'Let me look.', toolCalls: [{ id: 'p1', name: 'read_file', arguments: '{"path":"notes.txt"}' }], finishReason: 'tool_calls' }, { turn: b.turn, step: b.step, attempt: b.attempt });
  b.call({ name: 'read_file' });
  b.startTool(b.lastCall);
  b.push('tool/result', { ok: true, output: 'line one\n  line two\nline three\nline four\n', error: null, durationMs: 3 }, { turn: b.turn, step: b.step, call: b.lastCall });
  b.endStep('tool_calls', 1);
  b.startStep(2);
  return b;
}

describe('RunPrinter on a terminal', () => {
  test('streams the model text from live deltas, shows each call and its result in brief, and never prints a text twice', () => {
    const { printer, got } = capture(true);
    const b = demoTurn();
    const firstAttempt = b.events.findIndex((e) => e.type === 'attempt/start');
    printer.commit(b.events.slice(0, firstAttempt + 1));
    printer.delta({ type: 'text_delta', text: 'Let me ' });
    expect(screen(got.out).at(-1)).toBe('Let me ');
    printer.delta({ type: 'text_delta', text: 'look.' });
    printer.delta({ type: 'tool_call_delta', index: 0, id: 'p1', name: 'read_file', argumentsDelta: '{"path":"notes.txt"}' });
    printer.commit(b.events.slice(firstAttempt + 1));
    // step 2's answer: its deltas came before its attempt/start reached the follower
    printer.delta({ type: 'text_delta', text: 'The notes say hi.' });
    b.startAttempt().endAttempt();
    b.push('assistant/accepted', { content: 'The notes say hi.', toolCalls: [], finishReason: 'stop' }, { turn: b.turn, step: b.step, attempt: b.attempt });
    printer.commit(b.events.slice(-3));
    printer.endLine();
    const rows = screen(got.out).filter((r) => r !== '');
    expect(rows.slice(0, 7)).toEqual([
      'Let me look.',
      '▸ read_file notes.txt',
      '  └ ok · 41 bytes · 4 lines',
      '    line one',
      '      line two',
      '    line three',
      '    … 1 more line',
    ]);
    expect(rows[7]).toBe('The notes say hi.');
    expect(rows[8]).toMatch(/^step 2 · 240 tokens · cost unknown · \d+\.\ds$/);
    expect(got.out.split('Let me').length).toBe(2);
    expect(printer.answerShown('The notes say hi.')).toBe(true);
  });

  test('deltas missed: the committed text is printed; an attempt that fails after streaming says its text was not accepted', () => {
    const { printer, got } = capture(true);
    const b = new LogBuilder();
    b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt();
    printer.commit(b.events);
    printer.delta({ type: 'text_delta', text: 'Half an ans' });
    b.endAttempt('failed');
    b.startAttempt(2).endAttempt();
    b.push('assistant/accepted', { content: 'Reading it.', toolCalls: [{ id: 'p1', name: 'list_dir', arguments: '{}' }], finishReason: 'tool_calls' }, { turn: b.turn, step: b.step, attempt: b.attempt });
    printer.commit(b.events.slice(-4));
    printer.endLine();
    const rows = screen(got.out).filter((r) => r !== '' && !r.startsWith('step '));
    expect(rows).toEqual([
      'Half an ans',
      '  (the text above was not accepted: attempt failed)',
      'Reading it.',
    ]);
  });

  test('the elapsed time stops while a person decides, and what is printed meanwhile waits', async () => {
    const { printer, got } = capture(true);
    const b = new LogBuilder();
    b.receive('msg_1').startTurn('msg_1').startStep(1);
    printer.commit(b.events);
    printer.holdProgress(true, 'person');
    await new Promise((r) => setTimeout(r, 400));
    b.call({ name: 'write_file' });
    printer.commit(b.events.slice(-2));
    expect(got.out).not.toContain('write_file');
    expect(printer.elapsedMs()).toBeLessThan(300);
    printer.holdProgress(false, 'person');
    expect(got.out).toContain('▸ write_file');
    expect(printer.elapsedMs()).toBeLessThan(300);
    printer.endLine();
  });
});

describe('RunPrinter without a terminal, and --quiet', () => {
  test('one line per event that matters, naming the tools; no escape sequences; the final answer is left to the turn end', () => {
    const { printer, got } = capture(false);
    const b = demoTurn();
    b.answer('The notes say hi.');
    b.endStep('final');
    printer.commit(b.events);
    expect(got.out.trimEnd().split('\n')).toEqual([
      'step 1 · model: Let me look.',
      'step 1 · ▸ read_file notes.txt → ok · 41 bytes · 4 lines',
      'step 1: tool_calls · 1 tool call (read_file)',
      'step 2: final',
    ]);
    expect(got.out).not.toContain('\x1b');
    expect(printer.answerShown('The notes say hi.')).toBe(false);
  });

  test('a wait whose child failed says so on its result line, on a terminal or not', () => {
    for (const tty of [false, true]) {
      const { printer, got } = capture(tty);
      const b = new LogBuilder();
      b.receive('msg_1').startTurn('msg_1').startStep(1);
      const ids = { turn: b.turn, step: 'step_1', call: 'call_w' };
      b.push('tool/call', { index: 0, providerId: 'p1', name: 'wait_agents', arguments: '{}', status: 'valid', error: null, effects: 'none', recovery: 'rerun', withinBudget: true }, ids);
      b.push('subagent/completed', { childId: 'agt_child', messageId: 'msg_n', kind: 'subagent_completed', outcome: 'failed' }, ids);
      b.push('tool/result', { ok: true, output: 'child ended: failed', error: null, durationMs: 0, artifact: null, source: 'subagent:agt_child', trust: 'untrusted' }, ids);
      printer.commit(b.events);
      expect(screen(got.out).join('\n'), tty ? 'terminal' : 'lines').toMatch(/ok · 19 bytes · agt_child failed/);
    }
  });

  test('--quiet prints nothing as the run goes, on a terminal or not', () => {
    for (const tty of [true, false]) {
      const { printer, got } = capture(tty, { quiet: true });
      printer.commit(demoTurn().events);
      printer.delta({ type: 'text_delta', text: 'hello' });
      printer.endLine();
      expect(got.out + got.err).toBe('');
      expect(printer.wantsLive).toBe(false);
    }
  });
});

describe('RunPrinter seeded from a projection', () => {
  test('a call made before the follower came (an approval answered by a later command) is named in its result line', () => {
    const { printer, got } = capture(false);
    const b = new LogBuilder();
    b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt();
    b.push('assistant/accepted', { content: null, toolCalls: [{ id: 'p1', name: 'write_file', arguments: '{"path":"src/slug.js","content":"x"}' }], finishReason: 'tool_calls' }, { turn: b.turn, step: b.step, attempt: b.attempt });
    b.call({ name: 'write_file' });
    const p = emptyProjection('agt_1');
    for (const e of b.events) foldEvent(p, e);
    printer.seedFrom(p);
    const from = b.events.length;
    b.startTool(b.lastCall);
    b.push('tool/result', { ok: true, output: 'wrote 1 byte', error: null, durationMs: 3 }, { turn: b.turn, step: b.step, call: b.lastCall });
    b.endStep('tool_calls', 1);
    printer.commit(b.events.slice(from));
    expect(got.out).toMatch(/step 1 · ▸ write_file \S.* → ok/);
    expect(got.out).toContain('1 tool call (write_file)');
  });
});

describe('RunPrinter: a goal', () => {
  test('says its creation, each change, and each turn end it goes on from; nothing under --quiet', () => {
    const b = new LogBuilder();
    b.push('goal/created', { goalId: 'goal_1', objective: 'all tests pass', budget: {}, maxIdleTurns: 2 }, { turn: 'turn_1' });
    b.push('turn/end', { outcome: 'completed', reason: null, answer: 'fixed one of two', steps: 2, toolCalls: 1, usage: { inputTokens: 1, outputTokens: 1, estimated: false }, goalContinues: true }, { turn: 'turn_1' });
    b.push('goal/updated', { goalId: 'goal_1', revision: 1, expected: 0, phase: 'active', reason: 'both pass', by: 'model', requested: 'complete', usage: { tokens: 2, seconds: 1, costUsd: null } }, { turn: 'turn_2' });
    b.push('goal/updated', { goalId: 'goal_1', revision: 2, expected: 1, phase: 'complete', reason: 'both pass', by: 'runtime', usage: { tokens: 2, seconds: 1, costUsd: null } }, { turn: 'turn_2' });
    const { printer, got } = capture(false);
    printer.commit(b.events);
    expect(got.out.trimEnd().split('\n')).toEqual([
      'goal goal_1: all tests pass',
      'turn completed: fixed one of two · the goal goes on in a new turn',
      'goal revision 1: completion requested (both pass) · by model',
      'goal revision 2: complete (both pass) · by runtime',
    ]);
    const quiet = capture(false, { quiet: true });
    quiet.printer.commit(b.events);
    expect(quiet.got.out).toBe('');
  });
});
