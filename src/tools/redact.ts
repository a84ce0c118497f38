/**
 * Secret redaction for tool output: secrets are redacted before the model, the log and the logs
 * see an observation (design §8).
 *
 * Every rule scans the original text and reports spans; overlapping spans merge into one, so a
 * secret two rules both see (`TOKEN=ghp_…`) is one redaction, and a rule can never see another
 * rule's `[REDACTED:…]` marker. Patterns are written so each scan is linear: every variable
 * part is a character class, starts are anchored by a lookbehind to the start of a token (so a
 * long run is scanned from one start, not from each of its characters), and quantifiers are
 * bounded. Private keys are found with `indexOf`, not a regex over the block.
 *
 * Kinds: configured, private_key, github_token, slack_token, openai_key (also `sk-ant-…`),
 * stripe_key, aws_access_key, jwt, aws_secret_key, bearer, authorization, and for `NAME=value`
 * assignments (env, ini, query strings, flags, JSON keys) password, secret, token, key,
 * credentials. YAML-style `password: x` is not matched: in code it is a type annotation.
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

