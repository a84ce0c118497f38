import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import { isInside } from '../workspace-path.js';

/** One matching line, as both search engines report it. */
export interface SearchMatch {
  /** Absolute path of the file. */
  file: string;
  /** 1-based line number. */
  line: number;
  /** The line without its line break. */
  text: string;
}

/** What a search found: matches in path order, and whether more were left out. */
export interface SearchOutcome {
  matches: SearchMatch[];
  truncated: boolean;
}

/** What `ripgrepSearch` needs besides the pattern. */
export interface RipgrepOptions {
  /** Absolute path of the `rg` binary (`findRipgrep`). */
  rg: string;
  pattern: string;
  /** Real absolute path of the file or directory to search. */
  start: string;
  /** Working directory of the process (the workspace root). */
  cwd: string;
  maxFileBytes: number;
  /** Matches kept; one more marks the outcome truncated. */
  limit: number;
  signal: AbortSignal;
  /** Told why rg could not answer when the caller falls back to the JavaScript engine. */
  logger: Logger;
  /** Whether matches in this file may be reported: the checks rg cannot make (hard links, the binary sniff). */
  accept(file: string): Promise<boolean>;
}

/** rg's JSON stream is parsed line by line; past this many bytes the search stops as truncated. */
const MAX_OUTPUT_BYTES = 64 * 1024 * 1024;
const MAX_STDERR_BYTES = 16 * 1024;

/**
 * The absolute path of an executable `rg` on the PATH the tool was given, or null. Relative
 * PATH entries and binaries inside the workspace are skipped: the model can write files there,
 * and a planted `rg` would run with the runtime's rights.
 */
export async function findRipgrep(env: Readonly<Record<string, string>>, workspaceRoot: string): Promise<string | null> {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, 'rg');
    try {
      await access(candidate, constants.X_OK);
      const real = await realpath(candidate);
      if (!(await stat(real)).isFile() || isInside(workspaceRoot, real)) continue;
      return real;
    } catch {
      // not here: try the next PATH entry
    }
  }
  return null;
}

/**
 * Searches with ripgrep, made to agree with the JavaScript engine: no ignore files, hidden
 * files included, .git and node_modules skipped, symlinks not followed, files over the limit
 * skipped, path order; binary files are searched as text and dropped by `accept`, which
 * applies the same 8 KiB NUL sniff as the fallback. A pattern rg's regex engine rejects is
 * searched as literal text, unless JavaScript accepts it as a regex: then this returns null
 * and the caller uses the JavaScript engine, as it does when rg itself fails.
 */
export async function ripgrepSearch(opts: RipgrepOptions): Promise<SearchOutcome | null> {
  const regex = await run(opts, false);
  if (regex.kind === 'done') return regex.outcome;
  if (regex.kind === 'bad_regex' && isJsRegex(opts.pattern)) return null;
  const literal = regex.kind === 'bad_regex' ? await run(opts, true) : regex;
  if (literal.kind === 'done') return literal.outcome;
  opts.logger.warn({ rg: opts.rg, reason: literal.kind === 'failed' ? literal.reason : 'regex' }, 'rg failed; searching without it');
  return null;
}

type RunResult = { kind: 'done'; outcome: SearchOutcome } | { kind: 'bad_regex' } | { kind: 'failed'; reason: string };

async function run(opts: RipgrepOptions, fixed: boolean): Promise<RunResult> {
  // argv, never a shell string: the pattern and path reach rg as single arguments, metacharacters and all.
  const args = [
    '--json',
    '--no-config',
    '--no-ignore',
    '--hidden',
    '--no-follow',
    '--sort',
    'path',
    '--max-filesize',
    String(opts.maxFileBytes),
    '--text',
    '--crlf',
    '--encoding',
    'none',
    '--glob',
    '!.git/',
    '--glob',
    '!node_modules/',
    ...(fixed ? ['--fixed-strings'] : []),
    '-e',
    opts.pattern,
    '--',
    opts.start,
  ];
  // An empty environment: RIPGREP_CONFIG_PATH and friends must not change what rg does.
  const child = spawn(opts.rg, args, { cwd: opts.cwd, env: {}, stdio: ['ignore', 'pipe', 'pipe'], signal: opts.signal });
  const exited = new Promise<number | null>((resolve) => {
    child.once('close', (code) => resolve(code));
    child.once('error', () => resolve(null));
  });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    if (stderr.length < MAX_STDERR_BYTES) stderr += chunk;
  });

  const matches: SearchMatch[] = [];
  const accepted = new Map<string, boolean>();
  let truncated = false;
  let summary = false;
  let broken = false;
  let bytes = 0;
  const lines = createInterface({ input: child.stdout, crlfDelay: Infinity });
  try {
    for await (const raw of lines) {
      // Output already buffered still arrives after the kill: stop reading it.
      if (opts.signal.aborted) break;
      bytes += raw.length + 1;
      if (bytes > MAX_OUTPUT_BYTES) {
        truncated = true;
        break;
      }
      let message: RgMessage;
      try {
        message = JSON.parse(raw) as RgMessage;
      } catch {
        broken = true;
        break;
      }
      if (message.type === 'summary') summary = true;
      if (message.type !== 'match') continue;
      const file = decode(message.data.path);
      let ok = accepted.get(file);
      if (ok === undefined) {
        ok = await opts.accept(file);
        accepted.set(file, ok);
      }
      if (!ok) continue;
      if (matches.length === opts.limit) {
        truncated = true;
        break;
      }
      matches.push({ file, line: message.data.line_number, text: stripBreak(decode(message.data.lines)) });
    }
  } finally {
    lines.close();
    // Stopped early (cap, abort, a parse error): end the process rather than let it run on.
    if (child.exitCode === null) child.kill();
  }
  const code = await exited;
  opts.signal.throwIfAborted();
  if (truncated) return { kind: 'done', outcome: { matches, truncated } };
  if (broken) return { kind: 'failed', reason: 'rg printed a line that is not JSON' };
  if (code === 2 && stderr.includes('regex parse error')) return { kind: 'bad_regex' };
  // 1 is "no match"; 2 with a summary is "some files could not be read", which the fallback skips too.
  if (!summary) return { kind: 'failed', reason: stderr.split('\n', 1)[0] ?? `exit ${code}` };
  return { kind: 'done', outcome: { matches, truncated } };
}

/** The subset of rg's `--json` messages read here. */
type RgMessage =
  | { type: 'match'; data: { path: RgData; lines: RgData; line_number: number } }
  | { type: 'begin' | 'end' | 'context' | 'summary'; data: unknown };

/** rg sends text as `text`, or as base64 `bytes` when it is not valid UTF-8. */
type RgData = { text: string } | { bytes: string };

function decode(d: RgData): string {
  // Decoding bytes lossily matches the fallback, which decodes whole files as UTF-8.
  return 'text' in d ? d.text : Buffer.from(d.bytes, 'base64').toString('utf8');
}

function stripBreak(line: string): string {
  if (line.endsWith('\r\n')) return line.slice(0, -2);
  return line.endsWith('\n') ? line.slice(0, -1) : line;
}

function isJsRegex(pattern: string): boolean {
  try {
    new RegExp(pattern);
    return true;
  } catch {
    return false;
  }
}
