import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { access, open, realpath, stat } from 'node:fs/promises';
import { delimiter, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { createInterface } from 'node:readline';
import { ToolError } from '../protocol/errors.js';
import { estimateTokens, mergeRanges, type Excerpt, type Retriever, type RetrieverQuery } from './retriever.js';

/** Options of the ripgrep retriever; every one has a default. */
export interface RipgrepRetrieverOptions {
  /** Absolute path of `rg`; by default it is looked up on `searchPath`. */
  rgPath?: string;
  /** The PATH to look `rg` up on (absolute entries only; default `/usr/local/bin:/usr/bin:/bin`). */
  searchPath?: string;
  /** Files read for excerpts, those with the most matches first (default 50). */
  maxFiles?: number;
  /** Lines of context around each matching line (default 2). */
  contextLines?: number;
  /** Files larger than this are not searched (default 1 MiB). */
  maxFileBytes?: number;
  /** The search stops after this long (default 30 s). */
  timeoutMs?: number;
}

/** Stable codes of retriever errors. */
export const RETRIEVER_CODES = {
  rgMissing: 'retriever.rg_missing',
  rgFailed: 'retriever.rg_failed',
  outsideScope: 'retriever.outside_scope',
  notFound: 'retriever.not_found',
} as const;

const DEFAULT_SEARCH_PATH = ['/usr/local/bin', '/usr/bin', '/bin'].join(delimiter);
const MAX_WORDS = 16;
const MAX_WORD_CHARS = 200;
/** Matches rg reports per file: enough to rank files; the excerpts are found again in the file read. */
const MAX_COUNT_PER_FILE = 200;
const MAX_OUTPUT_BYTES = 32 * 1024 * 1024;
/** A line is cut to this many characters in an excerpt: one minified line must not take the budget. */
const MAX_LINE_CHARS = 500;
const SNIFF_BYTES = 8192;
const MAX_EXCERPT_LINES = 40;

/**
 * The first `Retriever`: the query's words searched as fixed strings, case-insensitive, by
 * ripgrep (`--no-config`, an empty environment, no symlinks followed, ignore files and hidden
 * files as rg has them, `.git` skipped), the files with most matches read again to cut excerpts
 * of the matching lines with context, best first until the token budget. The query reaches rg
 * as `-e` arguments, never through a shell.
 */
export function createRipgrepRetriever(opts: RipgrepRetrieverOptions = {}): Retriever {
  const maxFiles = opts.maxFiles ?? 50;
  const context = Math.max(0, opts.contextLines ?? 2);
  const maxFileBytes = opts.maxFileBytes ?? 1024 * 1024;
  const timeoutMs = opts.timeoutMs ?? 30_000;
  return {
    name: 'ripgrep',
    async search(q: RetrieverQuery, signal?: AbortSignal): Promise<Excerpt[]> {
      signal?.throwIfAborted();
      const words = queryWords(q.text);
      if (words.length === 0 || q.tokenBudget <= 0) return [];
      const root = await scopeRoot(q.scope.root);
      const targets = await Promise.all((q.scope.paths ?? ['.']).map((p) => scopePath(root, p)));
      const rg = await resolveRg(opts, root);
      const stop = new AbortController();
      const onAbort = (): void => stop.abort(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      const timer = setTimeout(() => stop.abort(new ToolError(RETRIEVER_CODES.rgFailed, `the search took longer than ${timeoutMs} ms`, { retryable: true })), timeoutMs);
      try {
        const counts = await runRg(rg, words, targets, root, maxFileBytes, stop.signal);
        const files = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, maxFiles);
        const ranges: Ranked[] = [];
        for (const [file] of files) {
          stop.signal.throwIfAborted();
          ranges.push(...(await excerptsOf(root, file, words, context, maxFileBytes)));
        }
        ranges.sort((a, b) => b.words - a.words || b.hits - a.hits || (a.excerpt.source < b.excerpt.source ? -1 : a.excerpt.source > b.excerpt.source ? 1 : 0) || a.excerpt.startLine - b.excerpt.startLine);
        return fill(ranges, q.tokenBudget);
      } catch (err) {
        if (stop.signal.aborted) throw stop.signal.reason;
        throw err;
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      }
    },
  };
}

/** The distinct words of a query, lowercased: each is searched as fixed text, so none is a pattern or a flag. */
function queryWords(text: string): string[] {
  // a NUL cannot be an argument (spawn would throw): it separates words like a space
  return [...new Set(text.toLowerCase().replace(/\0/g, ' ').split(/\s+/).filter((w) => w !== '').map((w) => w.slice(0, MAX_WORD_CHARS)))].slice(0, MAX_WORDS);
}

async function scopeRoot(root: string): Promise<string> {
  if (!isAbsolute(root)) throw new ToolError(RETRIEVER_CODES.outsideScope, `the search scope ${root} is not an absolute path`);
  const real = await realpath(root).catch(() => null);
  if (real === null || !(await stat(real)).isDirectory()) {
    throw new ToolError(RETRIEVER_CODES.notFound, `the search scope ${root} is not a directory`);
  }
  return real;
}

/** A scope path, real and inside the root: a symlink or `..` out of it is refused. */
async function scopePath(root: string, p: string): Promise<string> {
  const abs = resolve(root, p);
  const outside = (x: string): boolean => isOutside(root, x);
  if (outside(abs)) throw new ToolError(RETRIEVER_CODES.outsideScope, `${p} is outside the search scope ${root}`, { hint: 'name files or folders under the workspace' });
  const real = await realpath(abs).catch(() => null);
  if (real === null) throw new ToolError(RETRIEVER_CODES.notFound, `${p} does not exist under ${root}`);
  if (outside(real)) throw new ToolError(RETRIEVER_CODES.outsideScope, `${p} leads outside the search scope ${root} (a symbolic link)`);
  return real;
}

function isOutside(root: string, p: string): boolean {
  const rel = relative(root, p);
  return rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel);
}

/**
 * `rg` to run: the one named, else the first on the search path that is not inside the scope
 * (a model can write files there, and a planted `rg` would run with the runtime's rights).
 */
async function resolveRg(opts: RipgrepRetrieverOptions, root: string): Promise<string> {
  const candidates = opts.rgPath !== undefined ? [opts.rgPath] : (opts.searchPath ?? DEFAULT_SEARCH_PATH).split(delimiter).filter(isAbsolute).map((d) => join(d, 'rg'));
  for (const c of candidates) {
    try {
      await access(c, constants.X_OK);
      const real = await realpath(c);
      if ((await stat(real)).isFile() && isOutside(root, real)) return real;
    } catch {
      // not here: try the next
    }
  }
  throw new ToolError(RETRIEVER_CODES.rgMissing, `ripgrep (rg) was not found${opts.rgPath !== undefined ? ` at ${opts.rgPath}` : ' on the search path'}`, {
    hint: 'install the ripgrep package (apt-get install ripgrep, brew install ripgrep)',
  });
}

/** Files with matches (absolute real paths) and how many matching lines rg reported in each. */
async function runRg(rg: string, words: string[], targets: string[], root: string, maxFileBytes: number, signal: AbortSignal): Promise<Map<string, number>> {
  const args = [
    '--no-config', '--json', '--fixed-strings', '--ignore-case', '--no-follow', '--sort', 'path',
    '--max-filesize', String(maxFileBytes), '--max-count', String(MAX_COUNT_PER_FILE), '--glob', '!.git/',
    // each word after -e: a word that starts with `-` is a pattern, not a flag
    ...words.flatMap((w) => ['-e', w]),
    '--', ...targets,
  ];
  // an empty environment: RIPGREP_CONFIG_PATH and the like must not change what rg does
  const child = spawn(rg, args, { cwd: root, env: {}, stdio: ['ignore', 'pipe', 'pipe'], signal });
  const exited = new Promise<{ code: number | null; error: Error | null }>((done) => {
    child.once('close', (code) => done({ code, error: null }));
    child.once('error', (error) => done({ code: null, error }));
  });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (c: string) => {
    if (stderr.length < 16_384) stderr += c;
  });
  const counts = new Map<string, number>();
  let bytes = 0;
  let summary = false;
  const lines = createInterface({ input: child.stdout, crlfDelay: Infinity });
  try {
    for await (const raw of lines) {
      bytes += raw.length + 1;
      if (bytes > MAX_OUTPUT_BYTES) break; // enough to rank on; the rest is left out
      let msg: { type?: string; data?: { path?: { text?: string; bytes?: string } } };
      try {
        msg = JSON.parse(raw) as typeof msg;
      } catch {
        throw new ToolError(RETRIEVER_CODES.rgFailed, 'rg printed a line that is not JSON');
      }
      if (msg.type === 'summary') summary = true;
      if (msg.type !== 'match' || msg.data?.path?.text === undefined) continue; // a path that is not UTF-8 is skipped
      const file = resolve(root, msg.data.path.text);
      counts.set(file, (counts.get(file) ?? 0) + 1);
    }
  } finally {
    lines.close();
    if (child.exitCode === null) child.kill();
  }
  const { code, error } = await exited;
  signal.throwIfAborted();
  if (error && (error as NodeJS.ErrnoException).code === 'ENOENT') {
    throw new ToolError(RETRIEVER_CODES.rgMissing, `ripgrep (rg) at ${rg} could not be started`, { hint: 'install the ripgrep package' });
  }
  // 1 is "no match"; 2 with a summary is "some files could not be read", skipped as rg skips them
  if (error || (code !== 0 && code !== 1 && !summary && bytes <= MAX_OUTPUT_BYTES)) {
    throw new ToolError(RETRIEVER_CODES.rgFailed, `rg failed: ${error?.message ?? (stderr.split('\n', 1)[0] || `exit ${code}`)}`);
  }
  return counts;
}

/** An excerpt with what ranks it: the query's distinct words in it, then its matching lines. */
interface Ranked {
  excerpt: Excerpt;
  words: number;
  hits: number;
  /** The excerpt's lines, for cutting it to a budget. */
  lines: string[];
}

/** The excerpts of one file as read now (its version is what was read); a file that cannot be read as text gives none. */
async function excerptsOf(root: string, file: string, words: string[], context: number, maxFileBytes: number): Promise<Ranked[]> {
  if (isOutside(root, file)) return [];
  const rel = relative(root, file);
  let data: Buffer;
  try {
    const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      const info = await handle.stat();
      if (!info.isFile() || info.size > maxFileBytes) return [];
      data = await handle.readFile();
    } finally {
      await handle.close();
    }
  } catch {
    return []; // gone, replaced by a symlink, or unreadable since rg saw it
  }
  if (data.subarray(0, SNIFF_BYTES).includes(0)) return []; // binary
  const version = `sha256:${createHash('sha256').update(data).digest('hex')}`;
  const lines = data.toString('utf8').split(/\r?\n/);
  if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
  const lower = lines.map((l) => l.toLowerCase());
  const hits = lower.flatMap((l, i) => (words.some((w) => l.includes(w)) ? [i] : []));
  const source = rel.split(sep).join('/');
  // a long run of matching lines is cut into pieces, each ranked alone: one excerpt must not be a whole file
  const pieces = mergeRanges(hits, context, lines.length).flatMap(([from, to]) =>
    Array.from({ length: Math.ceil((to - from + 1) / MAX_EXCERPT_LINES) }, (_, i): [number, number] => [from + i * MAX_EXCERPT_LINES, Math.min(to, from + (i + 1) * MAX_EXCERPT_LINES - 1)]));
  return pieces.map(([from, to]) => {
    const cut = lines.slice(from, to + 1).map((l) => (l.length > MAX_LINE_CHARS ? `${l.slice(0, MAX_LINE_CHARS - 1)}…` : l));
    const text = cut.join('\n');
    const inRange = lower.slice(from, to + 1).join('\n');
    return {
      excerpt: { source, version, startLine: from + 1, endLine: to + 1, text, tokens: estimateTokens(text), estimated: true },
      words: words.filter((w) => inRange.includes(w)).length,
      hits: hits.filter((h) => h >= from && h <= to).length,
      lines: cut,
    };
  });
}

/** Best first until the budget: an excerpt too large for what is left is cut to its first lines that fit. */
function fill(ranked: Ranked[], budget: number): Excerpt[] {
  const out: Excerpt[] = [];
  let left = budget;
  for (const r of ranked) {
    if (r.excerpt.tokens <= left) {
      out.push(r.excerpt);
      left -= r.excerpt.tokens;
      continue;
    }
    let n = r.lines.length - 1;
    while (n > 0 && estimateTokens(r.lines.slice(0, n).join('\n')) > left) n--;
    if (n === 0) continue;
    const text = r.lines.slice(0, n).join('\n');
    out.push({ ...r.excerpt, endLine: r.excerpt.startLine + n - 1, text, tokens: estimateTokens(text) });
    left -= estimateTokens(text);
  }
  return out;
}
