import { describe, expect, test } from 'vitest';
import { terminalText } from '../../src/client/terminal-text.js';
import { describeEvent } from '../../src/cli/output.js';
import { EventSchema, type ActorEvent } from '../../src/protocol/events.js';

// every character a terminal must not be handed raw: C0 but TAB (and NL in a block), DEL, C1, bidi
const unsafe = (text: string, shape: 'line' | 'block'): string[] =>
  [...text].filter((ch) => {
    const c = ch.codePointAt(0)!;
    if (ch === '\t' || (ch === '\n' && shape === 'block')) return false;
    return c < 0x20 || (c >= 0x7f && c <= 0x9f) || [0x61c, 0x200e, 0x200f].includes(c) || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
  });

describe('terminalText', () => {
  test('an escape sequence, an OSC title and a BEL are shown, not sent', () => {
    expect(terminalText('a\x1b[2J\x1b]0;PWNED\x07b')).toBe('a\\x1b[2J\\x1b]0;PWNED\\x07b');
  });

  test('CR, NL and TAB: named; TAB kept; NL kept only in a block, where CRLF becomes NL', () => {
    expect(terminalText('rm -rf ~\rls\tx\ny')).toBe('rm -rf ~\\rls\tx\\ny');
    expect(terminalText('one\r\ntwo\nthree\rfour', 'block')).toBe('one\ntwo\nthree\\rfour');
  });

  test('DEL, C1 controls and bidi overrides are escaped; other text is untouched', () => {
    expect(terminalText('\x7f\x9b2J\u202eevil\u202c\u2066x\u2069')).toBe('\\x7f\\x9b2J\\u202eevil\\u202c\\u2066x\\u2069');
    const plain = 'naïve — 日本語 🙂 \\x1b C:\\path "quoted" \u00a0nbsp';
    expect(terminalText(plain)).toBe(plain);
    expect(terminalText(plain, 'block')).toBe(plain);
  });

  test('no character a terminal acts on survives, in either shape', () => {
    let all = '';
    for (let c = 0; c <= 0xa0; c += 1) all += String.fromCharCode(c);
    all += '\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069';
    expect(unsafe(terminalText(all), 'line')).toEqual([]);
    expect(unsafe(terminalText(all, 'block'), 'block')).toEqual([]);
  });
});

describe('describeEvent', () => {
  test('a tool result quoting a hostile file is one line with its controls shown', () => {
    const e = EventSchema.parse({
      v: 1, seq: 7, id: 'evt_1', at: '2026-01-01T00:00:00.000Z', actor: 'agt_01J00000000000000000000000', epoch: 1,
      type: 'tool/result', turn: 'trn_01J00000000000000000000000', step: 'stp_01J00000000000000000000000', call: 'call_1',
      data: { ok: true, output: 'x\x1b[2J\x1b]0;PWNED\x07y', error: null, durationMs: 3 },
    }) as ActorEvent;
    const line = describeEvent(e);
    expect(line).toContain('x\\x1b[2J\\x1b]0;PWNED\\x07y');
    expect(unsafe(line, 'line')).toEqual([]);
  });
});
