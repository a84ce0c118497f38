import type { ShNode, ShWord, ShWordPart } from 'mvdan-sh';

// Static evaluation of shell words: what a word is before the shell runs, and how far the shell
// may still change it. The policy leans on the difference: a deny rule must assume the worst of
// a word it cannot know, an allow rule must never assume the best.

/**
 * How well a word is known: `static` runs as written; `glob` may expand to matching file names
 * (`*`, `?`, `[…]`, `@(…)`); `dynamic` comes from an expansion (`$VAR`, `$(…)`, `$((…))`, brace
 * expansion) and may become any number of words.
 */
export type WordKind = 'static' | 'glob' | 'dynamic';

/** One word of a simple command: its text after quote removal, expansions kept as source text. */
export interface ShellWord {
  text: string;
  kind: WordKind;
}

/** A parsed script's source, to slice expansions back out as placeholders. */
export class ShellSource {
  private readonly bytes: Buffer;

  constructor(text: string) {
    // mvdan-sh offsets count UTF-8 bytes (it is Go), not UTF-16 code units.
    this.bytes = Buffer.from(text, 'utf8');
  }

  /** The source text of a node, such as `$HOME` or `$(date)`. */
  text(node: ShNode): string {
    return this.bytes.subarray(node.Pos().Offset(), node.End().Offset()).toString('utf8');
  }
}

const ANSI_C_SIMPLE: Readonly<Record<string, string>> = {
  a: '\x07', b: '\b', e: '\x1b', E: '\x1b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v',
  '\\': '\\', "'": "'", '"': '"', '?': '?',
};
const ANSI_C_ESCAPE = /\\(?:([abeEfnrtv\\'"?])|([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{1,4})|U([0-9a-fA-F]{1,8})|c([\s\S]))/g;

/** Decodes the body of a `$'…'` string as bash does, so `$'\x67it'` is seen as `git`. */
export function decodeAnsiC(raw: string): string {
  return raw.replace(ANSI_C_ESCAPE, (whole, simple?: string, oct?: string, hex?: string, u4?: string, u8?: string, ctl?: string) => {
    if (simple !== undefined) return ANSI_C_SIMPLE[simple] ?? simple;
    if (ctl !== undefined) return String.fromCharCode(ctl.charCodeAt(0) & 0x1f);
    const code = parseInt((oct ?? hex ?? u4 ?? u8) as string, oct !== undefined ? 8 : 16);
    return code <= 0x10ffff ? String.fromCodePoint(code) : whole;
  });
}

/** Whether unquoted literal text holds a glob operator that bash would expand. */
function hasGlob(raw: string): boolean {
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (c === '\\') i++;
    else if (c === '*' || c === '?') return true;
    // A lone `[` (the test command) is literal: only `[…]` with a closing bracket is a pattern.
    else if (c === '[' && raw.indexOf(']', i + 1) > i) return true;
  }
  return false;
}

// Brace expansion (`{git,push}`, `x{1..3}`) runs before quote removal and can turn one word into
// several, so a word that has it is dynamic. Detected on a "shape" of the word in which quoted and
// escaped text cannot supply the braces, the comma or the `..`.
const BRACE_EXPANSION = /\{[^{}]*(?:,|\.\.)[^{}]*\}/;

/** Evaluates a word statically: literal text with quotes and escapes removed, expansions kept as source. */
export function evalWord(word: ShWord, src: ShellSource, nodeType: (n: ShNode) => string): ShellWord {
  let text = '';
  let shape = '';
  let glob = false;
  let dynamic = false;
  for (const part of word.Parts) {
    const type = nodeType(part);
    if (type === 'Lit') {
      const raw = part.Value ?? '';
      text += raw.replace(/\\([\s\S])/g, '$1');
      shape += raw.replace(/\\[\s\S]/g, 'x');
      glob ||= hasGlob(raw);
    } else if (type === 'SglQuoted') {
      text += part.Dollar ? decodeAnsiC(part.Value ?? '') : (part.Value ?? '');
      shape += 'q';
    } else if (type === 'DblQuoted') {
      const inner = doubleQuoted(part, src, nodeType);
      text += inner.text;
      dynamic ||= inner.dynamic;
      shape += 'q';
    } else if (type === 'ExtGlob') {
      text += src.text(part);
      glob = true;
      shape += 'g';
    } else {
      // ParamExp, CmdSubst, ArithmExp, ProcSubst, and anything newer: known only at run time.
      text += src.text(part);
      dynamic = true;
      shape += 'e';
    }
  }
  if (BRACE_EXPANSION.test(shape)) dynamic = true;
  return { text, kind: dynamic ? 'dynamic' : glob ? 'glob' : 'static' };
}

function doubleQuoted(part: ShWordPart, src: ShellSource, nodeType: (n: ShNode) => string): { text: string; dynamic: boolean } {
  let text = '';
  let dynamic = false;
  for (const inner of part.Parts ?? []) {
    if (nodeType(inner) === 'Lit') {
      // Inside double quotes a backslash escapes only $ ` " \ and newline; elsewhere it stays.
      text += (inner.Value ?? '').replace(/\\([$`"\\\n])/g, '$1');
    } else {
      text += src.text(inner);
      dynamic = true;
    }
  }
  return { text, dynamic };
}
