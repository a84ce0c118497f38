import { mkdir, readFile, realpath, rmdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ToolError } from '../../protocol/errors.js';
import type { ToolDefinition, ToolPreview } from '../tool.js';
import { type FilePatch, parseUnifiedDiff, patchPaths } from '../unified-diff.js';
import { resolveInWorkspace, writeTarget } from '../workspace-path.js';
import { applyHunks, joinText, splitText, type TextLines } from '../apply-hunks.js';
import { displayPath, looksBinary, pathResource, replaceFileAtomic } from './text-file.js';

/** Files larger than this are not patched: the whole file and its new version are held in memory. */
export const MAX_PATCH_FILE_BYTES = 16 * 1024 * 1024;

const ApplyPatchInput = z.strictObject({
  patch: z
    .string()
    .describe(
      'A unified diff as `git diff` or `diff -u` prints it: "--- a/path" and "+++ b/path" headers, then "@@ -l,n +l,n @@" hunks; ' +
        'several files allowed; "--- /dev/null" creates a file, "+++ /dev/null" deletes one',
    ),
});
/** Input of `apply_patch`. */
export type ApplyPatchInput = z.infer<typeof ApplyPatchInput>;

/**
 * `apply_patch {patch}`: applies a unified diff to workspace files, all of it or none. Every
 * hunk of every file is checked against the current content and the new contents computed in
 * memory before the first write.
 */
export const applyPatchTool: ToolDefinition<ApplyPatchInput> = {
  name: 'apply_patch',
  version: '1',
  description:
    'Apply a unified diff to files in the workspace: edit, create (--- /dev/null) or delete (+++ /dev/null) files. ' +
    'Context and removed lines must match the files exactly (line numbers may be off a little); ' +
    'if any hunk does not apply, no file is changed. Re-read a file before patching it again.',
  input: ApplyPatchInput,
  level: 'write',
  // Re-applying a patch that landed fails on its own context, but a crash mid-commit may leave
  // some files written: a person decides.
  executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'manual', on: 'ask' } }),
  resources: (input, { workspace }) => patchPaths(input.patch).map((p) => pathResource(workspace, p, 'write')),
  // the patch a person approves is the patch as parsed: what it does to which file, and nothing else
  preview: (input) => patchPreview(input.patch),
  timeoutMs: 60_000,
  async execute(input, ctx) {
    ctx.signal.throwIfAborted();
    if (input.patch.trim() === '') {
      throw new ToolError('tool.patch_invalid', 'the patch is empty; pass a unified diff ("--- a/path", "+++ b/path", "@@ -l,n +l,n @@" hunks)');
    }
    const sections = parseUnifiedDiff(input.patch);
    const root = await realpath(ctx.workspace);
    // Keyed by real path, so two sections (or two spellings) of one file apply in sequence.
    const files = new Map<string, FileState>();
    for (const section of sections) {
      ctx.signal.throwIfAborted();
      const file = await resolveInWorkspace(ctx.workspace, section.path, { write: true });
      let state = files.get(file);
      if (!state) {
        state = await loadFile(file, section.path, displayPath(root, file));
        files.set(file, state);
      }
      applySection(state, section);
    }
    // A file both created and deleted by the patch was never there: nothing to write.
    const changes = [...files.values()].filter((f) => f.changed && !(f.original === null && f.text === null));
    ctx.signal.throwIfAborted();
    // From here on the signal is not checked: stopping between two files would leave half a patch.
    await commitChanges(
      changes.map((f) => ({
        file: f.file,
        shown: f.shown,
        before: f.original,
        after: f.text === null ? null : Buffer.from(joinText(f.text), 'utf8'),
        mode: f.mode,
      })),
    );
    const summary = changes.map(describe).join('; ');
    return { ok: true, output: summary === '' ? 'the patch changes nothing' : summary };
  },
};

/**
 * What approving `apply_patch` does: the files it touches (edit, create, delete, lines added and
 * removed), then the patch as the tool parsed it: file headers and hunks only, so text between
 * sections (a commit message, `index` lines) is not taken for part of what is approved. A patch
 * that does not parse is shown as sent, with why it will be refused.
 */
export function patchPreview(patch: string): ToolPreview {
  let sections: FilePatch[];
  try {
    sections = parseUnifiedDiff(patch);
  } catch (err) {
    const why = err instanceof ToolError ? err.message : String(err);
    return { kind: 'patch', summary: `a patch that will be refused: ${why}`, text: patch.replace(/\n$/, '') };
  }
  const files = sections.map((f) => {
    const added = f.hunks.reduce((n, h) => n + h.added, 0);
    const removed = f.hunks.reduce((n, h) => n + h.removed, 0);
    const verb = f.kind === 'create' ? 'create' : f.kind === 'delete' ? 'delete' : 'edit';
    return `${verb} ${f.path} (+${added} -${removed})`;
  });
  const text: string[] = [];
  for (const f of sections) {
    text.push(f.kind === 'create' ? '--- /dev/null' : `--- a/${f.path}`, f.kind === 'delete' ? '+++ /dev/null' : `+++ b/${f.path}`);
    for (const h of f.hunks) text.push(h.header, ...h.lines);
    if (f.hunks.length === 0) text.push(`(an empty file: ${f.kind === 'create' ? 'created' : 'deleted'})`);
  }
  const count = `${sections.length} file section${sections.length === 1 ? '' : 's'}`;
  return { kind: 'patch', summary: `patch ${count}: ${files.join(', ')}`, text: text.join('\n') };
}

/** One file as the patch sees it: its bytes before, its lines now (null: absent). */
interface FileState {
  file: string;
  shown: string;
  original: Buffer | null;
  mode: number | undefined;
  text: TextLines | null;
  changed: boolean;
  added: number;
  removed: number;
}

async function loadFile(file: string, requested: string, shown: string): Promise<FileState> {
  const info = await writeTarget(file, requested, 'apply_patch');
  const state: FileState = { file, shown, original: null, mode: undefined, text: null, changed: false, added: 0, removed: 0 };
  if (!info) return state;
  if (info.size > MAX_PATCH_FILE_BYTES) {
    throw new ToolError('tool.too_large', `${shown} is ${info.size} bytes, over the ${MAX_PATCH_FILE_BYTES}-byte limit of apply_patch`);
  }
  const bytes = await readFile(file);
  if (looksBinary(bytes)) throw new ToolError('tool.binary_file', `${shown} looks like a binary file (it contains NUL bytes); apply_patch edits text files only`);
  const text = bytes.toString('utf8');
  // Decoding replaces invalid bytes with U+FFFD: writing back would change lines the patch never touched.
  if (!Buffer.from(text, 'utf8').equals(bytes)) {
    throw new ToolError('tool.not_utf8', `${shown} is not valid UTF-8, so apply_patch cannot rewrite it without changing other bytes; use the shell`);
  }
  return { ...state, original: bytes, mode: info.mode, text: splitText(text) };
}

function applySection(state: FileState, section: FilePatch): void {
  const { shown } = state;
  if (section.kind === 'create' && state.text !== null) {
    throw new ToolError(
      'tool.patch_mismatch',
      `the patch creates ${shown} (--- /dev/null), but it already exists; read it with read_file and patch it instead. No file was changed.`,
    );
  }
  if (section.kind !== 'create' && state.text === null) {
    throw new ToolError(
      'tool.not_found',
      `the patch ${section.kind === 'delete' ? 'deletes' : 'edits'} ${shown}, which does not exist; ` +
        'to create a file use "--- /dev/null" as its old header (list_dir shows what exists). No file was changed.',
    );
  }
  const next = applyHunks(state.text ?? splitText(''), section.hunks, shown);
  for (const h of section.hunks) {
    state.added += h.added;
    state.removed += h.removed;
  }
  if (section.kind === 'delete') {
    if (next.lines.length > 0) {
      throw new ToolError(
        'tool.patch_mismatch',
        `the patch deletes ${shown} (+++ /dev/null), but its hunks leave ${next.lines.length} of its lines; ` +
          `re-read it with read_file: a deletion must remove every line. No file was changed.`,
      );
    }
    state.text = null;
  } else {
    state.text = next;
  }
  state.changed = true;
}

function describe(f: FileState): string {
  if (f.original === null) return `created ${f.shown}`;
  if (f.text === null) return `deleted ${f.shown}`;
  return `patched ${f.shown} (+${f.added} -${f.removed})`;
}

/** One file's change for the commit phase: bytes before (null: absent) and after (null: delete). */
export interface FileChange {
  file: string;
  /** The path as the model should see it, for messages. */
  shown: string;
  before: Buffer | null;
  after: Buffer | null;
  /** Mode of the file before, kept by a rewrite. */
  mode: number | undefined;
}

/** File operations of the commit phase: a port so a test can make one fail midway. */
export interface PatchFileOps {
  replace(file: string, bytes: Uint8Array, keepMode?: number): Promise<void>;
  remove(file: string): Promise<void>;
  /** Creates the parents of `file`; returns the directories made, deepest first. */
  makeParents(file: string): Promise<string[]>;
  removeDir(dir: string): Promise<void>;
}

/** The real file system. */
export const nodePatchFileOps: PatchFileOps = {
  replace: replaceFileAtomic,
  remove: (file) => unlink(file),
  async makeParents(file) {
    const dir = path.dirname(file);
    const first = await mkdir(dir, { recursive: true });
    if (first === undefined) return [];
    const made: string[] = [];
    for (let d = dir; ; d = path.dirname(d)) {
      made.push(d);
      if (d === first || path.dirname(d) === d) break;
    }
    return made;
  },
  removeDir: (dir) => rmdir(dir),
};

/**
 * Writes every change, each atomically (temp file + fsync + rename), deletions last. When one
 * fails, the changes already made are undone from the in-memory originals and the new
 * directories removed. Residual window: a crash (not an error) mid-commit leaves the files
 * written so far changed, and a reader between two renames sees half the patch.
 */
export async function commitChanges(changes: FileChange[], ops: PatchFileOps = nodePatchFileOps): Promise<void> {
  const ordered = [...changes.filter((c) => c.after !== null), ...changes.filter((c) => c.after === null)];
  const done: FileChange[] = [];
  const madeDirs: string[] = [];
  for (const change of ordered) {
    try {
      if (change.after === null) {
        await ops.remove(change.file);
      } else {
        if (change.before === null) madeDirs.push(...(await ops.makeParents(change.file)));
        await ops.replace(change.file, change.after, change.before === null ? undefined : change.mode);
      }
      done.push(change);
    } catch (err) {
      const failed = await undo(done, madeDirs, ops);
      const reason = err instanceof Error ? err.message : String(err);
      const state =
        failed.length === 0
          ? 'every file already written was restored, so the workspace is as before'
          : `these files could not be restored and may hold the patched content: ${failed.join(', ')}; check them with read_file`;
      throw new ToolError('tool.patch_write_failed', `writing ${change.shown} failed (${reason}); ${state}`, { cause: err });
    }
  }
}

/** Undoes `done` in reverse; returns the files it could not restore. */
async function undo(done: FileChange[], madeDirs: string[], ops: PatchFileOps): Promise<string[]> {
  const failed: string[] = [];
  for (const change of [...done].reverse()) {
    try {
      if (change.before === null) await ops.remove(change.file);
      else await ops.replace(change.file, change.before, change.mode);
    } catch {
      failed.push(change.shown);
    }
  }
  // Deepest first; a directory something else wrote into meanwhile is not empty and stays.
  for (const dir of [...new Set(madeDirs)].sort((a, b) => b.length - a.length)) {
    await ops.removeDir(dir).catch(() => undefined);
  }
  return failed;
}
