// The line capture of a followed turn (`run` on a terminal): lines typed and ended with Enter are
// reported, Ctrl-C is a press of the interrupt key, and while paused (an approval prompt reads the
// terminal) nothing is taken. Fake streams stand for the terminal: a PassThrough that says it is
// a TTY and records raw mode.
import { PassThrough } from 'node:stream';
import { describe, expect, test } from 'vitest';
import { SteerLines } from '../../src/cli/steer-lines.js';

function terminal() {
  const input = Object.assign(new PassThrough(), { isTTY: true, raw: [] as boolean[], setRawMode(raw: boolean) { input.raw.push(raw); return input; } });
  const output = new PassThrough();
  let echoed = '';
  output.setEncoding('utf8').on('data', (s: string) => (echoed += s));
  const seen = { lines: [] as string[], interrupts: 0, typing: [] as boolean[] };
  const lines = new SteerLines({
    input, output,
    onLine: (t) => seen.lines.push(t),
    onInterrupt: () => (seen.interrupts += 1),
    onTyping: (t) => seen.typing.push(t),
  });
  const type = async (s: string): Promise<void> => {
    input.write(s);
    await new Promise((r) => setImmediate(r));
  };
  return { input, lines, seen, type, echoed: () => echoed };
}

describe('SteerLines', () => {
  test('a typed line is reported trimmed once Enter ends it, in raw mode, and echoed; blank lines are not', async () => {
    const t = terminal();
    t.lines.start();
    expect(t.input.raw.at(-1)).toBe(true);
    await t.type('  go left ');
    expect(t.seen.lines).toEqual([]);
    expect(t.seen.typing).toEqual([true]);
    await t.type('\r');
    expect(t.seen.lines).toEqual(['go left']);
    expect(t.seen.typing).toEqual([true, false]);
    await t.type('   \r');
    expect(t.seen.lines).toEqual(['go left']);
    expect(t.echoed()).toContain('go left');
    t.lines.stop();
    expect(t.input.raw.at(-1)).toBe(false);
  });

  test('Ctrl-C is an interrupt and drops what was typed', async () => {
    const t = terminal();
    t.lines.start();
    await t.type('half a thou');
    await t.type('\x03');
    expect(t.seen.interrupts).toBe(1);
    await t.type('ght\r');
    expect(t.seen.lines).toEqual(['ght']);
    t.lines.stop();
  });

  test('paused, nothing is taken and the terminal is back in cooked mode; started again, lines come again', async () => {
    const t = terminal();
    t.lines.start();
    t.lines.pause();
    expect(t.lines.reading).toBe(false);
    expect(t.input.raw.at(-1)).toBe(false);
    // what the prompt reads (an approval's answer) is the prompt's
    t.input.read();
    t.lines.start();
    await t.type('after the prompt\r');
    expect(t.seen.lines).toEqual(['after the prompt']);
    t.lines.stop();
    t.lines.start();
    expect(t.lines.reading).toBe(false);
  });
});
