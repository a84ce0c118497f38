/**
 * Secret redaction for tool output: secrets are redacted before the model, the log and the logs
 * see an observation (design §8).
 *
 * Every rule scans the original text and reports spans; overlapping spans merge into one, so a
 * secret two rules both see (`TOKEN=ghp_…`) is one redaction, and a rule can never see another
 * rule's `[REDACTED:…]` marker. Patterns are written so each scan is linear: every variable
 * part is a character class, starts are anchored by a lookbehind to the start of a token (so a
 * long run is scanned from one start, not from each of its characters), and quantifiers are
 * bounded. Private keys are found with `indexOf`, not a regex over the block, and key bodies
 * without their armour by one pass over the lines.
 *
 * Kinds: configured, private_key, key_block (key body lines without their BEGIN line: a partial
 * read, `sed -n`, `grep -v -- -----`, `tail`, a one-line base64 blob), github_token, slack_token,
 * openai_key (also `sk-ant-…`), stripe_key, aws_access_key, jwt, aws_secret_key, bearer,
 * authorization, and for `NAME=value` assignments (env, ini, query strings, flags, JSON keys)
 * password, secret, token, key, credentials. YAML-style `password: x` is not matched: in code it
 * is a type annotation.
 *
 * Binary output is not redacted: bytes that are not UTF-8 text are stored as an artifact and
 * never shown as text; `artifact_read` masks the spans this module finds in its hex dump.
 */

/** One secret found in a text: `[start, end)` in UTF-16 code units, and its kind. */
export interface RedactionSpan {
  start: number;
  end: number;
  kind: string;
}

/** Finds and replaces secrets in text. */
export interface Redactor {
  /** The text with each secret replaced by `[REDACTED:<kind>]`, and how many were replaced. */
  redact(text: string): { text: string; count: number };
  /** The secrets in a text in order, overlapping finds merged into one span. */
  spans(text: string): RedactionSpan[];
}

/**
 * Configured secret values shorter than this are ignored: a short value ("admin", "1234") also
 * occurs as an ordinary word or number, and redacting every occurrence would garble output.
 */
export const MIN_SECRET_VALUE_CHARS = 8;

type Push = (start: number, end: number, kind: string) => void;
type Finder = (text: string, push: Push) => void;

/** A redactor for the built-in secret patterns plus exact occurrences of `secretValues`. */
export function createRedactor(secretValues: readonly string[] = []): Redactor {
  const configured = literalFinder(secretValues);
  // Configured values go first: an exact value is the surest find, and on a tie in start the
  // earlier finder names the kind.
  const finders = configured ? [configured, ...PATTERN_FINDERS] : PATTERN_FINDERS;

  const spans = (text: string): RedactionSpan[] => {
    const found: RedactionSpan[] = [];
    const push: Push = (start, end, kind) => {
      if (end > start) found.push({ start, end, kind });
    };
    for (const find of finders) find(text, push);
    return merge(found);
  };

  return {
    spans,
    redact(text) {
      const found = spans(text);
      if (found.length === 0) return { text, count: 0 };
      const parts: string[] = [];
      let at = 0;
      for (const s of found) {
        parts.push(text.slice(at, s.start), `[REDACTED:${s.kind}]`);
        at = s.end;
      }
      parts.push(text.slice(at));
      return { text: parts.join(''), count: found.length };
    },
  };
}

/** Sorts spans by start (stable, so finder order breaks ties) and merges overlapping ones. */
function merge(found: RedactionSpan[]): RedactionSpan[] {
  found.sort((a, b) => a.start - b.start);
  const out: RedactionSpan[] = [];
  for (const s of found) {
    const last = out[out.length - 1];
    if (last && s.start < last.end) last.end = Math.max(last.end, s.end);
    else out.push({ ...s });
  }
  return out;
}

function regexFinder(re: RegExp, toSpan: (m: RegExpExecArray) => [number, number, string] | null): Finder {
  return (text, push) => {
    // The regexes are shared between redactors; the scan is synchronous, so resetting suffices.
    re.lastIndex = 0;
    let m: RegExpExecArray | null;
    while ((m = re.exec(text)) !== null) {
      const span = toSpan(m);
      if (span) push(...span);
      if (m[0].length === 0) re.lastIndex++;
    }
  };
}

/** The whole match is the secret. */
function whole(re: RegExp, kind: string, accept: (value: string) => boolean = () => true): Finder {
  return regexFinder(re, (m) => (accept(m[0]) ? [m.index, m.index + m[0].length, kind] : null));
}

/**
 * The first defined capture group from `first` on (of a `d`-flagged regex) is the secret; the
 * rest of the match (the name, `=`, quotes) stays. Groups before `first` name a keyword or scheme.
 */
function valueGroup(
  re: RegExp,
  first: number,
  kindOf: (m: RegExpExecArray) => string,
  accept: (value: string, m: RegExpExecArray, text: string) => boolean,
  trimEnd = false,
): Finder {
  return (text, push) =>
    regexFinder(re, (m) => {
      for (let g = first; g < m.length; g++) {
        const range = m.indices?.[g];
        if (m[g] === undefined || !range) continue;
        // An ini value runs to the line end; its trailing blanks are not part of it.
        const value = trimEnd ? m[g]!.replace(/[ \t]+$/, '') : m[g]!;
        return accept(value, m, text) ? [range[0], range[0] + value.length, kindOf(m)] : null;
      }
      return null;
    })(text, push);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function literalFinder(values: readonly string[]): Finder | null {
  // Longest first, so a value that contains another is redacted whole.
  const usable = [...new Set(values)].filter((v) => v.length >= MIN_SECRET_VALUE_CHARS).sort((a, b) => b.length - a.length);
  if (usable.length === 0) return null;
  return whole(new RegExp(usable.map(escapeRegExp).join('|'), 'g'), 'configured');
}

const PEM_BEGIN = /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----/g;

/** Whole PEM private-key blocks; a block without its END line (cut output) is redacted to the end. */
function privateKeys(text: string, push: Push): void {
  PEM_BEGIN.lastIndex = 0;
  let m: RegExpExecArray | null;
  while ((m = PEM_BEGIN.exec(text)) !== null) {
    const endLine = text.indexOf('-----END ', PEM_BEGIN.lastIndex);
    let end = text.length;
    if (endLine !== -1) {
      const close = text.indexOf('-----', endLine + 9);
      end = close !== -1 && close - endLine < 80 ? close + 5 : endLine + 9;
    }
    push(m.index, end, 'private_key');
    if (end >= text.length) return;
    PEM_BEGIN.lastIndex = end;
  }
}

/**
 * Base64 body lines shorter than this are not key lines on their own: a key's lines are 64
 * (PEM) or 70 (OpenSSH) characters, and shorter base64-looking lines are words, hashes and IDs.
 */
const KEY_LINE_MIN_CHARS = 40;
/** One base64 line this long is a key blob by itself, with no neighbour to vouch for it. */
const KEY_BLOB_MIN_CHARS = 200;

/** What one line of output is, for `keyBlocks`. */
interface KeyLine {
  /** The base64 part of a body line (after a tool's `path:12:` prefix), or null for any other line. */
  body: [number, number] | null;
  /** Long and mixed like random base64: upper and lower case, and a digit, `+` or `/`. */
  strong: boolean;
  /**
   * A PEM armour line, or a piece of one: the BEGIN or END of a private key (`private` when a cut
   * left neither word, or a piece of unknown label), or the BEGIN or END of another kind of block.
   */
  armour: 'private-begin' | 'private-end' | 'private' | 'begin-other' | 'end-other' | null;
  /** Blank, or a PEM header (`Proc-Type: …`): may sit between a BEGIN line and its body. */
  header: boolean;
}

const isBlank = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0d;
const isDigitCode = (c: number): boolean => c >= 0x30 && c <= 0x39;

/**
 * Where a tool's line prefix ends: `path:`, `path:12:`, `12:` (grep -n, rg, search,
 * artifact_read's grep) with blanks after, or `12\t`, `12-` (cat -n, nl, grep context lines).
 */
function afterPrefix(text: string, s: number, to: number): number {
  let k = s;
  while (k < to && !isBlank(text.charCodeAt(k)) && text[k] !== ':') k++;
  if (k < to && text[k] === ':') {
    s = k + 1;
    let d = s;
    while (d < to && isDigitCode(text.charCodeAt(d))) d++;
    if (d > s && (text[d] === ':' || text[d] === '-')) s = d + 1;
  } else {
    let d = s;
    while (d < to && isDigitCode(text.charCodeAt(d))) d++;
    if (d > s && (text[d] === '\t' || text[d] === '-')) s = d + 1;
  }
  while (s < to && isBlank(text.charCodeAt(s))) s++;
  return s;
}

const PUBLIC_LABEL = /PUBLIC|CERTIFICATE/;
const ARMOUR_LABEL = /^[A-Z0-9 ]{1,80}$/;
const PEM_HEADER = /^[A-Za-z-]{1,40}: /;

/** Reads one line `[from, to)`; each character is looked at a bounded number of times. */
function keyLine(text: string, from: number, to: number): KeyLine {
  let start = from;
  while (start < to && isBlank(text.charCodeAt(start))) start++;
  const s = afterPrefix(text, start, to);
  let e = to;
  while (e > s && isBlank(text.charCodeAt(e - 1))) e--;
  const line: KeyLine = { body: null, strong: false, armour: null, header: false };
  // search and artifact_read cut long lines with an ellipsis
  const bs = text[s] === '…' ? s + 1 : s;
  const be = text[e - 1] === '…' ? e - 1 : e;
  let p = be;
  while (p > bs && be - p < 2 && text[p - 1] === '=') p--;
  let upper = false;
  let lower = false;
  let other = false;
  let k = bs;
  for (; k < p; k++) {
    const c = text.charCodeAt(k);
    if (c >= 0x41 && c <= 0x5a) upper = true;
    else if (c >= 0x61 && c <= 0x7a) lower = true;
    else if (isDigitCode(c) || c === 0x2b || c === 0x2f) other = true;
    else break;
  }
  if (k === p && p > bs) {
    line.body = [bs, be];
    line.strong = be - bs >= KEY_LINE_MIN_CHARS && upper && lower && other;
    return line;
  }
  // most lines are no armour: only those that start or end with dashes are copied out to look at
  if (text.startsWith('-----', s) || (e - s >= 5 && text.endsWith('-----', e))) line.armour = armourOf(text.slice(s, e));
  line.header = start === to || (!line.armour && PEM_HEADER.test(text.slice(start, Math.min(to, start + 48))));
  return line;
}

/**
 * A PEM armour line (`-----BEGIN X-----`) or a piece of one a cut left (`-----BEGIN RSA PRIV`,
 * `E KEY-----`). A whole line names its kind; a piece that names no public label is taken as
 * private, the worst it can be. `-----Original Message-----` and a bare `-----` are not armour.
 */
function armourOf(line: string): KeyLine['armour'] {
  if (!line.startsWith('-----') && !line.endsWith('-----')) return null;
  let a = 0;
  while (a < line.length && line[a] === '-') a++;
  let b = line.length;
  while (b > a && line[b - 1] === '-') b--;
  const label = line.slice(a, b);
  if (!ARMOUR_LABEL.test(label)) return null;
  const begins = label.startsWith('BEGIN ') ? 'begin' : label.startsWith('END ') ? 'end' : null;
  if (label.includes('PRIVATE')) return begins ? `private-${begins}` : 'private';
  if (begins && a === 5 && b === line.length - 5) return `${begins}-other`;
  return PUBLIC_LABEL.test(label) ? null : begins ? `private-${begins}` : 'private';
}

/**
 * Key bodies however they are sliced, in one pass over the lines. Consecutive base64 body lines
 * form a run; a run is redacted
 * - whole, when it follows a private key's BEGIN line or precedes its END line (or a piece of
 *   either a cut left): a read that starts or ends at the armour (`head -c`, `tail`), so even a
 *   single or short line is key;
 * - in its stretches of two or more strong lines, and a single strong line of
 *   `KEY_BLOB_MIN_CHARS` or more, each with the shorter last line of a block after it: a slice
 *   from the middle of a key, or `grep -v -- -----` of one.
 * Strong means mixed like random base64, so hex (a git sha, a sha256) and base32 never qualify,
 * and a line with a blank, quote or punctuation (code, prose, a lockfile's `"integrity":
 * "sha512-…"`) is not a body line. The bodies of certificates, public keys and other armoured
 * blocks stay when their armour shows what they are (after their BEGIN line and its headers, or
 * just before their END line); without armour a base64 block cannot be told from a key's, so
 * `base64` output of any file is redacted too.
 */
function keyBlocks(text: string, push: Push): void {
  // One line at a time, keeping only the open run: 50 MB of short lines is no array of lines.
  let before: KeyLine['armour'] = null;
  let inOther = false;
  let run: BodyRun | null = null;
  for (let at = 0; at <= text.length; ) {
    const nl = text.indexOf('\n', at);
    const end = nl === -1 ? text.length : nl;
    const line = keyLine(text, at, end);
    at = end + 1;
    if (line.body) {
      run ??= { start: line.body[0], end: 0, exempt: inOther, afterPrivate: before === 'private-begin' || before === 'private', stretch: null, blocks: [] };
      extendRun(run, line.body, line.strong);
      continue;
    }
    if (run) settleRun(run, line.armour, push);
    run = null;
    if (line.armour) inOther = line.armour === 'begin-other';
    else if (!line.header) inOther = false;
    before = line.armour;
  }
  if (run) settleRun(run, null, push);
}

/** Consecutive body lines seen so far, and the key blocks among them if no armour decides. */
interface BodyRun {
  start: number;
  end: number;
  /** Inside a certificate's or public key's armour. */
  exempt: boolean;
  /** Just after a private key's BEGIN line, or a piece of armour that could be one. */
  afterPrivate: boolean;
  /** The open stretch of strong lines: where it starts, its lines, and its last line. */
  stretch: { start: number; lines: number; last: [number, number] } | null;
  blocks: [number, number][];
}

function extendRun(run: BodyRun, body: [number, number], strong: boolean): void {
  run.end = body[1];
  if (strong) {
    if (run.stretch) {
      run.stretch.lines++;
      run.stretch.last = body;
    } else run.stretch = { start: body[0], lines: 1, last: body };
  } else closeStretch(run, body);
}

/** Ends the open stretch; `tail` is the body line after it, which a block's shorter last line is. */
function closeStretch(run: BodyRun, tail: [number, number] | null): void {
  const st = run.stretch;
  if (!st) return;
  run.stretch = null;
  const lastLength = st.last[1] - st.last[0];
  if (st.lines < 2 && lastLength < KEY_BLOB_MIN_CHARS) return;
  const end = tail && tail[1] - tail[0] < lastLength ? tail[1] : st.last[1];
  run.blocks.push([st.start, end]);
}

/** Redacts what a run holds, now that `next` (the armour of the line after it, if any) is known. */
function settleRun(run: BodyRun, next: KeyLine['armour'], push: Push): void {
  closeStretch(run, null);
  if (run.exempt || next === 'end-other') return;
  if (run.afterPrivate || next === 'private-end' || next === 'private') push(run.start, run.end, 'key_block');
  else for (const [start, end] of run.blocks) push(start, end, 'key_block');
}

const hasDigit = (v: string): boolean => /[0-9]/.test(v);

/** Opaque tokens have digits, or are long and mixed-case; prose after "bearer" is neither. */
function looksLikeToken(v: string): boolean {
  return hasDigit(v) || (v.length >= 20 && /[a-z]/.test(v) && /[A-Z]/.test(v));
}

// Names whose value is a secret: the keyword must end the name (`DB_PASSWORD`, not `PASSWORD_FILE`).
const KEYWORDS = String.raw`pass(?:word|wd|phrase)|secret(?:[_-]?key)?|token|api[_-]?key|access[_-]?key|auth[_-]?key|credentials?`;
// A name: up to 64 name characters, lazily, then the keyword. Starting only where no name
// character precedes keeps every run of name characters to one start.
const NAME = String.raw`[A-Za-z0-9_.-]{0,64}?(${KEYWORDS})`;

function keywordKind(m: RegExpExecArray): string {
  const k = m[1]!.toLowerCase();
  if (k.startsWith('pass')) return 'password';
  if (k.startsWith('secret')) return 'secret';
  if (k === 'token') return 'token';
  return k.startsWith('cred') ? 'credentials' : 'key';
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_.]*$/;
const LITERAL = /^(?:none|null|nil|undefined|true|false)$/i;

/**
 * Whether an assigned value is plausibly a secret rather than code or a reference: `${TOKEN}`,
 * `%TOKEN%`, `<token>`, `token=get()`, `None`, `password=password`, `f(token=token)` are not.
 */
function plausibleValue(value: string, m: RegExpExecArray, text: string): boolean {
  const v = value.trim();
  if (v === '' || /^[$%{<[]/.test(v) || v.includes('(') || LITERAL.test(v)) return false;
  if (IDENTIFIER.test(v)) {
    if (v.toLowerCase().includes(m[1]!.toLowerCase())) return false;
    const next = text[m.index + m[0].length];
    if (next === ')' || next === ',') return false; // a keyword argument in code
  }
  return true;
}

const INI = new RegExp(String.raw`^[ \t]*(?:export[ \t]+)?${NAME}(?:[ \t]+=[ \t]*|=[ \t]+)(?:"([^"\r\n]{1,4096})"|'([^'\r\n]{1,4096})'|([^\r\n]{1,4096}))`, 'dgim');
const INLINE = new RegExp(
  String.raw`(?<![A-Za-z0-9_.-])${NAME}=(?:"([^"\r\n]{1,4096})"|'([^'\r\n]{1,4096})'|([^\s"'&;,()[\]{}<>]{1,4096}))`,
  'dgi',
);
const JSON_KEY = new RegExp(String.raw`"${NAME}"[ \t]*:[ \t]*"((?:[^"\\\r\n]|\\.){1,4096})"`, 'dgi');
const AUTHORIZATION = /authorization["']?[ \t]*[:=][ \t]*["']?(?:(bearer|basic|token|bot|digest)[ \t]+)?([A-Za-z0-9._~+/=-]{8,4096})/dgi;
const BEARER = /(?<![A-Za-z0-9_])(bearer)[ \t]+([A-Za-z0-9._~+/=-]{8,4096})/dgi;

const PATTERN_FINDERS: Finder[] = [
  privateKeys,
  keyBlocks,
  whole(/(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{30,255})/g, 'github_token'),
  whole(/(?<![A-Za-z0-9_-])xox[abprs]-[A-Za-z0-9-]{10,255}/g, 'slack_token'),
  // OpenAI (`sk-…`, `sk-proj-…`) and Anthropic (`sk-ant-…`) keys; a digit rules out hyphenated words.
  whole(/(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,255}/g, 'openai_key', (v) => hasDigit(v) && /[A-Za-z]/.test(v.slice(3))),
  whole(/(?<![A-Za-z0-9_])[rs]k_(?:live|test)_[A-Za-z0-9]{16,255}/g, 'stripe_key'),
  whole(/(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])/g, 'aws_access_key'),
  whole(/(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,4096}\.[A-Za-z0-9_-]{5,4096}\.[A-Za-z0-9_-]{0,4096}/g, 'jwt'),
  // `aws_secret_access_key = …` in credentials files and `"SecretAccessKey": "…"` in CLI JSON.
  valueGroup(/(?:aws_?)?secret_?access_?key["']?[ \t]*[:=][ \t]*["']?([A-Za-z0-9/+=]{16,128})/dgi, 1, () => 'aws_secret_key', () => true),
  valueGroup(AUTHORIZATION, 2, (m) => (m[1]?.toLowerCase() === 'bearer' ? 'bearer' : 'authorization'), looksLikeToken),
  valueGroup(BEARER, 2, () => 'bearer', looksLikeToken),
  valueGroup(JSON_KEY, 2, keywordKind, plausibleValue),
  valueGroup(INLINE, 2, keywordKind, plausibleValue),
  // `password = my pass phrase` (blanks around `=`, at a line start, as in ini files)
  valueGroup(INI, 2, keywordKind, plausibleValue, true),
];

