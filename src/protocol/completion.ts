import { z } from 'zod';

// The completion policy's vocabulary (design §6a): what "done" means for a run, and the pure
// parts both sides of it share: the projection folding evidence from the log, and the runtime
// (and `verify`) reading citations out of an answer. Both must name a file the same way, or a
// real citation would look fabricated, so the normalization lives here, once. No `node:path`:
// the projection is bundled for the browser.

/**
 * When a final answer completes a turn: `answer` (a validated answer, the default),
 * `code-change` (a change to files needs a passing verification after it), `cited` (every
 * citation names evidence the session retrieved).
 */
export const CompleteWhenSchema = z.enum(['answer', 'code-change', 'cited']);
/** One of the completion policies. */
export type CompleteWhen = z.infer<typeof CompleteWhenSchema>;

/**
 * What the refusal at `max_completion_rejections` does (`on_completion_exhausted`): `fail` the
 * turn (the default), or `block` the agent's active goal and stop the turn (`fail` without one).
 */
export const OnCompletionExhaustedSchema = z.enum(['fail', 'block']);
/** One of `fail`, `block`. */
export type OnCompletionExhausted = z.infer<typeof OnCompletionExhaustedSchema>;

/** Answers a turn's completion policy may refuse before the turn fails (`max_completion_rejections`). */
export const DEFAULT_MAX_COMPLETION_REJECTIONS = 3;

/** Tools whose results are evidence `cited` accepts: a file read, a search hit, an artifact. */
export const RETRIEVING_TOOLS: readonly string[] = ['read_file', 'search', 'artifact_read'];

const ARTIFACT_ID = /^art_[0-9A-Z]{26}$/;

/**
 * The key a piece of evidence is known by: an artifact ID as is; a path relative to the workspace,
 * `/`-separated, without `./`, `a/../` or a line anchor (`:12`, `:12-20`, `#L12`), so
 * `[./src/a.ts:3]` and a `read_file` of `src/a.ts` name one file. Lexical only.
 */
export function evidenceKey(ref: string, workspace: string): string {
  const s = ref.trim();
  if (ARTIFACT_ID.test(s)) return s;
  let p = s.replace(/\\/g, '/').replace(/#L\d+(-L?\d+)?$/, '').replace(/:\d+(-\d+)?$/, '');
  const ws = workspace.replace(/\\/g, '/').replace(/\/+$/, '');
  if (ws !== '' && p === ws) p = '.';
  else if (ws !== '' && p.startsWith(`${ws}/`)) p = p.slice(ws.length + 1);
  const parts: string[] = [];
  for (const part of p.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..' && parts.length > 0 && parts[parts.length - 1] !== '..') parts.pop();
    else parts.push(part);
  }
  const joined = parts.join('/');
  // still absolute: a path outside the workspace keeps its root, so it never equals a relative one
  if (p.startsWith('/')) return `/${joined}`;
  return joined === '' ? '.' : joined;
}

// `[id]`: a bracketed token without whitespace, not a Markdown link's text (`[text](url)`) nor a
// task-list box (`[x]`).
const MARKER = /\[([^[\]\s]+)\](?!\()/g;

/**
 * The citations of a final answer: the `citations` array of a structured answer (strings, or
 * objects naming an `id`, `path` or `source`), else the answer's `[<id>]` markers. In order, once each.
 */
export function citationsOf(answer: string, structured: boolean): string[] {
  const found: string[] = [];
  if (structured) {
    let value: unknown;
    try {
      value = JSON.parse(answer);
    } catch {
      value = null;
    }
    const list = value !== null && typeof value === 'object' ? (value as { citations?: unknown }).citations : undefined;
    if (Array.isArray(list)) {
      for (const c of list) {
        const id = typeof c === 'string' ? c : c !== null && typeof c === 'object' ? firstString(c as Record<string, unknown>) : null;
        if (id !== null && id.trim() !== '') found.push(id.trim());
      }
      return [...new Set(found)];
    }
  }
  for (const m of answer.matchAll(MARKER)) {
    const id = m[1]!;
    if (id === 'x' || id === 'X') continue;
    found.push(id);
  }
  return [...new Set(found)];
}

function firstString(o: Record<string, unknown>): string | null {
  for (const k of ['id', 'path', 'source']) if (typeof o[k] === 'string') return o[k] as string;
  return null;
}

/** The file paths of a `search` result's lines (`path:line: text`), as the tool printed them. */
export function searchHitPaths(output: string): string[] {
  const paths = new Set<string>();
  for (const line of output.split('\n')) {
    const m = /^(.+?):\d+: /.exec(line);
    if (m) paths.add(m[1]!);
  }
  return [...paths];
}

/**
 * Whether a shell call's plan is a verification: every simple command it runs (argv after
 * wrappers) starts with the words of one of `prefixes` (`npm test` matches `npm test -- -t x`),
 * `cd` aside. A chain with anything else in it (`npm test && rm x`) is not: it may change files.
 */
export function isVerification(commands: readonly (readonly string[])[] | undefined, prefixes: readonly string[]): boolean {
  if (!commands || commands.length === 0 || prefixes.length === 0) return false;
  const wanted = prefixes.map((p) => p.trim().split(/\s+/).filter(Boolean)).filter((w) => w.length > 0);
  let verifies = false;
  for (const argv of commands) {
    if (argv[0] === 'cd') continue;
    if (!wanted.some((w) => startsWith(argv, w))) return false;
    verifies = true;
  }
  return verifies;
}

function startsWith(argv: readonly string[], words: readonly string[]): boolean {
  if (argv.length < words.length) return false;
  const program = argv[0] ?? '';
  // `npm` matches `/usr/bin/npm`; a prefix naming a path must match that path
  const head = words[0]!.includes('/') ? program === words[0] : program === words[0] || program.endsWith(`/${words[0]}`);
  return head && words.every((w, i) => i === 0 || argv[i] === w);
}

/** Prefix of the reason a turn fails with when its completion policy refused every answer it allows. */
export const COMPLETION_EXHAUSTED = 'completion policy';

/** The reason a turn stops with when, under `block`, the refusal at the limit blocked its goal. */
export const COMPLETION_EXHAUSTED_STOP = 'completion_exhausted';

/** Prefix of the reason a goal is blocked with by the completion policy: `completion:<policy>: <what was missing>`. */
export const COMPLETION_BLOCK_PREFIX = 'completion:';
