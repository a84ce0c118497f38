import { ToolError } from '../protocol/errors.js';

/** One hunk of a unified diff: the old lines it expects and the new lines it puts in their place. */
export interface Hunk {
  /** The `@@ … @@` line as written, for messages. */
  header: string;
  /** 1-based line of the header in the patch. */
  patchLine: number;
  oldStart: number;
  oldCount: number;
  newStart: number;
  /** Context and removed lines, in order: what must be in the file. */
  oldLines: string[];
  /** Context and added lines, in order: what replaces them. */
  newLines: string[];
  /** Lines the hunk adds (`+`) and removes (`-`). */
  added: number;
  removed: number;
  /** A `\ No newline at end of file` marker follows the last old line. */
  oldNoEol: boolean;
  /** A `\ No newline at end of file` marker follows the last new line. */
  newNoEol: boolean;  /** The body as parsed, each line with its ` `, `-`, `+` or `\` (an editor's trimmed empty context line restored): what a person is shown. */
  lines: string[];
}

/** The changes a patch makes to one file. */
export interface FilePatch {
  kind: 'modify' | 'create' | 'delete';
  /** The path as the patch names it, with git's `a/` / `b/` prefix removed. */
  path: string;
  /** 1-based line of the file's first header in the patch. */
  patchLine: number;
  hunks: Hunk[];
}

const HUNK_HEADER = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;
const DEV_NULL = '/dev/null';

/**
 * Parses a unified diff (`git diff`, `diff -u`) strictly: hunk bodies must match their header
 * counts, and anything unsupported (renames, binary patches, mode changes) is refused rather
 * than guessed. Text between file sections (commit messages, `index` lines) is skipped, as
 * `git apply` does. Throws `tool.patch_invalid` naming the patch line at fault.
 */
export function parseUnifiedDiff(patch: string): FilePatch[] {
  const lines = patchLines(patch);
  const files: FilePatch[] = [];
  let git: GitHeader | null = null;
  let i = 0;
  const flushGit = (): void => {
    if (git) files.push(gitOnlySection(git));
    git = null;
  };
  while (i < lines.length) {
    const line = lines[i]!;
    if (line.startsWith('diff --git ')) {
      flushGit();
      git = { line: i + 1, path: gitHeaderPath(line.slice('diff --git '.length)), create: false, delete: false };
    } else if (git && /^(rename|copy) (from|to) /.test(line)) {
      throw invalid(i + 1, 'renames and copies are not supported; patch the file in place, or write the new file and delete the old one');
    } else if (line.startsWith('Binary files ') || line === 'GIT binary patch') {
      throw invalid(i + 1, 'binary patches are not supported; apply_patch edits text files');
    } else if (git && line.startsWith('new file mode ')) {
      git.create = true;
    } else if (git && line.startsWith('deleted file mode ')) {
      git.delete = true;
    } else if (line.startsWith('--- ')) {
      git = null;
      i = parseFileSection(lines, i, files);
      continue;
    } else if (line.startsWith('+++ ')) {
      throw invalid(i + 1, `a "+++" header must follow a "--- " header`);
    } else if (line.startsWith('@@')) {
      throw invalid(i + 1, 'a hunk comes before any file header; start each file with "--- a/path" and "+++ b/path" lines');
    }
    i++;
  }
  flushGit();
  if (files.length === 0) {
    throw invalid(1, 'the patch has no file sections; a patch is "--- a/path", "+++ b/path", then "@@ -l,n +l,n @@" hunks');
  }
  return files;
}

/** The paths a patch names, or an empty list when it does not parse (for resource keys: no fs). */
export function patchPaths(patch: string): string[] {
  try {
    return [...new Set(parseUnifiedDiff(patch).map((f) => f.path))];
  } catch {
    return [];
  }
}

/** A `diff --git` header whose file may have no `---`/`+++` lines (an empty file created or deleted). */
interface GitHeader {
  line: number;
  path: string | null;
  create: boolean;
  delete: boolean;
}

function gitOnlySection(git: GitHeader): FilePatch {
  if (git.path === null) throw invalid(git.line, 'cannot read the file name of this "diff --git" header');
  if (!git.create && !git.delete) {
    throw invalid(git.line, `the section for ${git.path} has no hunks; mode-only changes are not supported`);
  }
  return { kind: git.create ? 'create' : 'delete', path: git.path, patchLine: git.line, hunks: [] };
}

/** The one path of `a/x b/x` (both halves equal, as for every non-rename), else null. */
function gitHeaderPath(rest: string): string | null {
  if (rest.startsWith('"')) {
    const a = unquote(rest);
    const b = a ? unquote(rest.slice(a.consumed).trimStart()) : null;
    return a && b && stripPrefix(a.name, 'a/') === stripPrefix(b.name, 'b/') ? stripPrefix(a.name, 'a/') : null;
  }
  const half = (rest.length - 1) / 2;
  if (!Number.isInteger(half) || rest[half] !== ' ') return null;
  const a = stripPrefix(rest.slice(0, half), 'a/');
  return a === stripPrefix(rest.slice(half + 1), 'b/') ? a : null;
}

/** Parses `--- old`, `+++ new` and their hunks from line index `start`; returns the next index. */
function parseFileSection(lines: string[], start: number, files: FilePatch[]): number {
  const next = lines[start + 1];
  if (next === undefined || !next.startsWith('+++ ')) {
    throw invalid(start + 2, `expected a "+++ b/path" header after the "--- " header on line ${start + 1}`);
  }
  const oldName = headerName(lines[start]!, start + 1, 'a/');
  const newName = headerName(next, start + 2, 'b/');
  let kind: FilePatch['kind'] = 'modify';
  if (oldName === DEV_NULL && newName === DEV_NULL) throw invalid(start + 1, 'both headers are /dev/null; name the file');
  if (oldName === DEV_NULL) kind = 'create';
  else if (newName === DEV_NULL) kind = 'delete';
  else if (oldName !== newName) {
    throw invalid(
      start + 1,
      `the headers name two files (${oldName} and ${newName}); renames are not supported, and both headers must name the same path`,
    );
  }
  const path = kind === 'create' ? newName : oldName;
  const hunks: Hunk[] = [];
  let i = start + 2;
  for (;;) {
    // Blank lines between hunks: a model's spacing, not content (a hunk body is counted).
    let j = i;
    while (lines[j] === '') j++;
    if (!lines[j]?.startsWith('@@')) break;
    const hunk = parseHunk(lines, j);
    i = hunk.end;
    hunks.push(hunk.hunk);
  }
  if (hunks.length === 0) throw invalid(start + 1, `the section for ${path} has no hunks ("@@ -l,n +l,n @@" lines)`);
  for (const h of hunks) {
    if (kind === 'create' && h.oldLines.length > 0) {
      throw invalid(h.patchLine, `${path} is created (--- /dev/null), so its hunks may only add lines (use "@@ -0,0 +1,n @@")`);
    }
    if (kind === 'delete' && h.newLines.length > 0) {
      throw invalid(h.patchLine, `${path} is deleted (+++ /dev/null), so its hunks may only remove lines`);
    }
  }
  const trailing = lines[i];
  // A body line right after a complete hunk means the header's counts are too small.
  if (trailing !== undefined && /^[-+ ]/.test(trailing) && !isFileHeader(lines, i) && trailing !== '-- ') {
    const last = hunks[hunks.length - 1]!;
    throw invalid(i + 1, `the hunk at line ${last.patchLine} (${last.header}) has more lines than its header counts; fix the counts`);
  }
  files.push({ kind, path, patchLine: start + 1, hunks });
  return i;
}

function isFileHeader(lines: string[], i: number): boolean {
  return lines[i]!.startsWith('--- ') && (lines[i + 1]?.startsWith('+++ ') ?? false);
}

function parseHunk(lines: string[], start: number): { hunk: Hunk; end: number } {
  const header = lines[start]!;
  const m = HUNK_HEADER.exec(header);
  if (!m) throw invalid(start + 1, `malformed hunk header ${JSON.stringify(header)}; expected "@@ -start,count +start,count @@"`);
  const oldCount = m[2] === undefined ? 1 : Number(m[2]);
  const newCount = m[4] === undefined ? 1 : Number(m[4]);
  const hunk: Hunk = {
    header: header.slice(0, m[0].length),
    patchLine: start + 1,
    oldStart: Number(m[1]),
    oldCount,
    newStart: Number(m[3]),
    oldLines: [],
    newLines: [],
    added: 0,
    removed: 0,
    oldNoEol: false,
    newNoEol: false,
    lines: [],
  };
  const short = (at: number): ToolError =>
    invalid(
      at,
      `the hunk at line ${start + 1} (${hunk.header}) ends after ${hunk.oldLines.length} old and ${hunk.newLines.length} new lines, ` +
        `but its header counts ${oldCount} and ${newCount}; fix the counts, and start every body line with " ", "-" or "+"`,
    );
  let i = start + 1;
  let last = '';
  while (hunk.oldLines.length < oldCount || hunk.newLines.length < newCount || lines[i]?.startsWith('\\')) {
    const line = lines[i];
    if (line === undefined) throw short(i + 1);
    // An empty line is an empty context line whose leading space an editor trimmed.
    const op = line === '' ? ' ' : line[0];
    const text = line.slice(1);
    const oldFull = hunk.oldLines.length >= oldCount;
    const newFull = hunk.newLines.length >= newCount;
    if (op === '\\') {
      markNoEol(hunk, last, i + 1, oldFull, newFull);
    } else if (op === ' ' && !oldFull && !newFull) {
      hunk.oldLines.push(text);
      hunk.newLines.push(text);
    } else if (op === '-' && !oldFull) {
      hunk.oldLines.push(text);
      hunk.removed++;
    } else if (op === '+' && !newFull) {
      hunk.newLines.push(text);
      hunk.added++;
    } else {
      throw short(i + 1);
    }
    hunk.lines.push(op === '\\' ? line : `${op}${text}`);
    if (op !== '\\') last = op!;
    i++;
  }
  return { hunk, end: i };
}

/** Records `\ No newline at end of file`, which is valid only right after the last line of its side. */
function markNoEol(hunk: Hunk, after: string, line: number, oldFull: boolean, newFull: boolean): void {
  const misplaced = (): ToolError =>
    invalid(line, '"\\ No newline at end of file" may only follow the last old or new line of a hunk');
  if (after === ' ' || after === '-') {
    if (!oldFull || hunk.oldNoEol) throw misplaced();
    hunk.oldNoEol = true;
  }
  if (after === ' ' || after === '+') {
    if (!newFull || hunk.newNoEol) throw misplaced();
    hunk.newNoEol = true;
  }
  if (after === '') throw misplaced();
}

/** The name of a `--- ` / `+++ ` header: unquoted, without a timestamp or its git prefix. */
function headerName(line: string, lineNo: number, prefix: 'a/' | 'b/'): string {
  const rest = line.slice(4);
  let name: string;
  if (rest.startsWith('"')) {
    const quoted = unquote(rest);
    if (!quoted) throw invalid(lineNo, `cannot read the quoted file name in ${JSON.stringify(line)}`);
    name = quoted.name;
  } else {
    // `diff -u` puts a tab and a timestamp after the name.
    name = rest.split('\t', 1)[0]!.trimEnd();
  }
  if (name === DEV_NULL) return name;
  name = stripPrefix(name, prefix);
  if (name === '') throw invalid(lineNo, `the header ${JSON.stringify(line)} names no file`);
  return name;
}

function stripPrefix(name: string, prefix: string): string {
  return name.startsWith(prefix) ? name.slice(prefix.length) : name;
}

const ESCAPES: Record<string, number> = { a: 7, b: 8, f: 12, n: 10, r: 13, t: 9, v: 11, '\\': 92, '"': 34 };

/** Git's C-style quoted name (`"a/caf\303\251 x"`): octal escapes are bytes of UTF-8. */
function unquote(s: string): { name: string; consumed: number } | null {
  const bytes: number[] = [];
  for (let i = 1; i < s.length; i++) {
    const c = s[i]!;
    if (c === '"') return { name: Buffer.from(bytes).toString('utf8'), consumed: i + 1 };
    if (c !== '\\') {
      bytes.push(...Buffer.from(c, 'utf8'));
      continue;
    }
    const e = s[++i];
    if (e !== undefined && /^[0-7]{3}$/.test(s.slice(i, i + 3))) {
      bytes.push(parseInt(s.slice(i, i + 3), 8));
      i += 2;
    } else if (e !== undefined && ESCAPES[e] !== undefined) {
      bytes.push(ESCAPES[e]);
    } else {
      return null;
    }
  }
  return null;
}

/**
 * The patch's lines, split on LF. When every line ends in CRLF the patch itself went through
 * a CRLF conversion (a paste, a Windows editor) and the CRs are dropped; otherwise a CR is
 * content (`git diff` of a CRLF file), and the file's own line endings decide (see `applyHunks`).
 */
function patchLines(patch: string): string[] {
  const lines = patch.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const crlf = lines.length > 0 && lines.every((l, i) => l.endsWith('\r') || (i === lines.length - 1 && !patch.endsWith('\n')));
  return crlf ? lines.map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l)) : lines;
}

function invalid(line: number, why: string): ToolError {
  return new ToolError('tool.patch_invalid', `the patch does not parse at line ${line}: ${why}`);
}
