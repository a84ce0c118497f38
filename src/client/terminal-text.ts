/**
 * What a terminal is given of text the runtime did not write: answers, tool output, file
 * contents quoted in events, approval arguments, error messages that quote them. A terminal acts
 * on control characters (ESC starts a sequence that can clear the screen, retitle the window or
 * rewrite what a person reads before approving), so each is shown as an escape instead:
 *
 * - C0 controls, DEL and C1 controls (U+0080–U+009F) as `\xHH` (ESC is `\x1b`, BEL `\x07`), and
 *   CR, NL and TAB as `\r`, `\n`, `\t`;
 * - the bidi controls that reorder what is shown (U+061C, U+200E, U+200F, U+202A–U+202E,
 *   U+2066–U+2069) as `\uHHHH`.
 *
 * TAB is harmless and kept. A `block` (an answer, a list of violations) keeps its line breaks
 * (CRLF becomes NL); a `line` (one event, one approval field) shows them escaped, so one entry
 * stays one line. A backslash is left as it is: `\x1b` written by a model reads the same as an ESC
 * it sent, and neither reaches the terminal. `--json` output does not come here: JSON.stringify
 * already escapes C0 controls, and that output must stay the exact value.
 */
export type TextShape = 'line' | 'block';

// C0, DEL, C1, then the bidi marks and overrides
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** `text` with every control character a terminal would act on written out visibly (see above). */
export function terminalText(text: string, shape: TextShape = 'line'): string {
  const source = shape === 'block' ? text.replace(/\r\n/g, '\n') : text;
  return source.replace(UNSAFE, (ch) => {
    if (ch === '\t' || (ch === '\n' && shape === 'block')) return ch;
    const named = NAMED[ch];
    if (named) return named;
    const code = ch.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
