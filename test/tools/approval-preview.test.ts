import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApprovalPreviewSchema } from '../../src/protocol/events.js';
import { PREVIEW_TEXT_BYTES, boundText, previewCall, type PreviewOptions } from '../../src/tools/approval-preview.js';
import { applyPatchTool, shellTool, writeFileTool } from '../../src/tools/builtins/index.js';
import { HEAD_LINES, MAX_DIFF_FILE_BYTES } from '../../src/tools/builtins/write-file-preview.js';
import { defaultPlan } from '../../src/tools/policy.js';
import { createRedactor } from '../../src/tools/redact.js';
import { parseShellCommand } from '../../src/tools/shell-command.js';
import type { ExecutionPlan, ToolDefinition } from '../../src/tools/tool.js';

let base: string;
let ws: string;

beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'actorloop-preview-')));
  ws = path.join(base, 'ws');
  await mkdir(path.join(ws, 'src'), { recursive: true });
  await writeFile(path.join(ws, 'src', 'slug.js'), 'export function slugify(t) {\n  return t\n    .trim()\n    .replace(" ", "-");\n}\n');
});
afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

/** The plan the runtime would make of a call (as `planCall` does: the tool's plan, and a shell command's argv). */
function planOf<I>(tool: ToolDefinition<I>, input: I): ExecutionPlan {
  const ctx = { workspace: ws };
  const plan = tool.plan ? tool.plan(input, ctx) : defaultPlan(tool, input, tool.resources(input, ctx), ws);
  const command = (input as { command?: unknown }).command;
  if (typeof command === 'string') {
    const parsed = parseShellCommand(command);
    if (parsed.ok) plan.commands = parsed.commands.map((c) => c.argv);
  }
  return plan;
}

/** The preview `requestApproval` records for a call, checked against the event schema. */
async function preview<I>(tool: ToolDefinition<I>, raw: I, over: Partial<PreviewOptions> = {}) {
  const input = tool.input.parse(raw);
  const p = await previewCall(tool as ToolDefinition<unknown>, input, {
    workspace: ws,
    plan: planOf(tool, input),
    env: {},
    sandboxed: true,
    redactor: createRedactor([]),
    ...over,
  });
  return ApprovalPreviewSchema.parse(p);
}

describe('write_file preview', () => {
  it('over an existing file is a unified diff: file headers, @@ hunks, -old and +new lines', async () => {
    const content = 'export function slugify(t) {\n  return t\n    .trim()\n    .replace(/\\s+/g, "-");\n}\n';
    const p = await preview(writeFileTool, { path: 'src/slug.js', content });
    expect(p).toMatchObject({ kind: 'diff', summary: 'edit src/slug.js (+1 -1)', truncated: false });
    expect(p.fallback).toBeUndefined();
    const lines = p.text.split('\n');
    expect(lines.slice(0, 2)).toEqual(['--- a/src/slug.js', '+++ b/src/slug.js']);
    expect(lines).toContain('@@ -1,5 +1,5 @@');
    expect(lines).toContain('-    .replace(" ", "-");');
    expect(lines).toContain('+    .replace(/\\s+/g, "-");');
    // context lines keep their leading space
    expect(lines).toContain('     .trim()');
  });

  it('for a new file says its size and lines and shows its head', async () => {
    const content = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
    const p = await preview(writeFileTool, { path: 'src/new.txt', content });
    expect(p.summary).toBe(`new file src/new.txt, ${Buffer.byteLength(content)} bytes, 30 lines`);
    const lines = p.text.split('\n');
    expect(lines.slice(0, 2)).toEqual(['--- /dev/null', '+++ b/src/new.txt']);
    expect(lines.slice(2)).toEqual(Array.from({ length: HEAD_LINES }, (_, i) => `+line ${i + 1}`));
    expect(p).toMatchObject({ truncated: true, omitted: `${30 - HEAD_LINES} more lines not shown` });
  });

  it('says "no change" when the file already holds the content', async () => {
    const p = await preview(writeFileTool, { path: 'src/slug.js', content: 'export function slugify(t) {\n  return t\n    .trim()\n    .replace(" ", "-");\n}\n' });
    expect(p.summary).toMatch(/^no change: src\/slug\.js already holds this content/);
    expect(p.text).toBe('');
  });

  it('says binary content and files too large to diff instead of dumping them', async () => {
    await writeFile(path.join(ws, 'blob.bin'), Buffer.from([1, 0, 2, 0, 3]));
    const binary = await preview(writeFileTool, { path: 'blob.bin', content: 'text now\n' });
    expect(binary).toMatchObject({ summary: 'replace blob.bin (5 bytes) with 9 bytes', text: 'binary content: not shown' });

    await writeFile(path.join(ws, 'big.txt'), 'x'.repeat(MAX_DIFF_FILE_BYTES + 10));
    const big = await preview(writeFileTool, { path: 'big.txt', content: 'short\n' });
    expect(big.summary).toBe(`replace big.txt (${MAX_DIFF_FILE_BYTES + 10} bytes) with 6 bytes, 1 line`);
    expect(big.text).toMatch(/^too large to diff here .*\nshort$/);
  });

  it('two versions too different for a readable diff: says so and shows the new head', async () => {
    const old = Array.from({ length: 6000 }, (_, i) => `old ${i}`).join('\n');
    await writeFile(path.join(ws, 'many.txt'), old);
    const content = Array.from({ length: 6000 }, (_, i) => `new ${i}`).join('\n');
    const p = await preview(writeFileTool, { path: 'many.txt', content });
    expect(p.summary).toBe(`replace many.txt (${Buffer.byteLength(old)} bytes) with ${Buffer.byteLength(content)} bytes, 6000 lines`);
    expect(p.text.split('\n')).toEqual(['the two versions differ too much for a readable diff; the new content begins:', ...Array.from({ length: HEAD_LINES }, (_, i) => `new ${i}`)]);
    expect(p).toMatchObject({ truncated: true, omitted: `${6000 - HEAD_LINES} more lines not shown` });
  });

  it('a path the write would refuse (a link out of the workspace) shows the plan and says why, reading nothing outside', async () => {
    await mkdir(path.join(base, 'outside'));
    await writeFile(path.join(base, 'outside', 'secret.txt'), 'the outside secret\n');
    await symlink(path.join(base, 'outside', 'secret.txt'), path.join(ws, 'link.txt'));
    const p = await preview(writeFileTool, { path: 'link.txt', content: 'new\n' });
    expect(p.kind).toBe('input');
    expect(p.fallback).toMatch(/^write_file could not show this call \(path "link\.txt" is outside the workspace/);
    expect(p.text).toContain('writes: link.txt');
    expect(p.text).not.toContain('the outside secret');
  });

  it('the diff goes through the redactor: a secret in the current file is not recorded', async () => {
    await writeFile(path.join(ws, '.env'), 'API_TOKEN=sk-live-0123456789abcdefghij\nDEBUG=1\n');
    const p = await preview(writeFileTool, { path: '.env', content: 'API_TOKEN=sk-live-0123456789abcdefghij\nDEBUG=0\n' }, {
      redactor: createRedactor(['sk-live-0123456789abcdefghij']),
    });
    expect(p.text).toContain('-DEBUG=1');
    expect(p.text).toContain('+DEBUG=0');
    expect(p.text).not.toContain('sk-live-0123456789abcdefghij');
    expect(p.text).toContain('[REDACTED');
  });
});

describe('apply_patch preview', () => {
  it('is the patch as parsed, with the files it touches; text between sections is dropped', async () => {
    const patch = [
      'commit message the patch came with',
      'diff --git a/src/slug.js b/src/slug.js',
      'index 83db48f..bf269f4 100644',
      '--- a/src/slug.js',
      '+++ b/src/slug.js',
      '@@ -3,2 +3,2 @@',
      '     .trim()',
      '-    .replace(" ", "-");',
      '+    .replace(/\\s+/g, "-");',
      '--- /dev/null',
      '+++ b/src/new.js',
      '@@ -0,0 +1,1 @@',
      '+export const x = 1;',
      '',
    ].join('\n');
    const p = await preview(applyPatchTool, { patch });
    expect(p.summary).toBe('patch 2 file sections: edit src/slug.js (+1 -1), create src/new.js (+1 -0)');
    expect(p.text.split('\n')).toEqual([
      '--- a/src/slug.js',
      '+++ b/src/slug.js',
      '@@ -3,2 +3,2 @@',
      '     .trim()',
      '-    .replace(" ", "-");',
      '+    .replace(/\\s+/g, "-");',
      '--- /dev/null',
      '+++ b/src/new.js',
      '@@ -0,0 +1,1 @@',
      '+export const x = 1;',
    ]);
  });

  it('a patch that does not parse is shown as sent, with why it will be refused', async () => {
    const p = await preview(applyPatchTool, { patch: '--- a/x\n+++ b/x\n@@ -1,2 +1,1 @@\n-a\n' });
    expect(p.summary).toMatch(/^a patch that will be refused: the patch does not parse at line/);
    expect(p.text).toBe('--- a/x\n+++ b/x\n@@ -1,2 +1,1 @@\n-a');
  });
});

describe('shell preview', () => {
  it('shows the argv of each simple command, the cwd, the environment names (no values), network and the sandbox', async () => {
    const env = { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', GITHUB_TOKEN: 'ghp_secretsecretsecret', NATS_URL: 'nats://x' };
    const p = await preview(shellTool, { command: `git status && rm -rf 'build dir'`, cwd: 'src' }, { env, sandboxed: true });
    expect(p).toMatchObject({ kind: 'command', summary: '2 commands, sandboxed, no network' });
    const lines = p.text.split('\n');
    expect(lines).toContain(`command: git status && rm -rf 'build dir'`);
    expect(lines).toContain('runs: git status');
    expect(lines).toContain(`runs: rm -rf 'build dir'`);
    expect(lines).toContain('cwd: src');
    // what the process gets: secrets and the runtime's own variables are stripped, HOME and TMPDIR set
    expect(lines).toContain('environment (names only): HOME LANG PATH TMPDIR');
    expect(p.text).not.toContain('ghp_secret');
    expect(lines).toContain('network: no');
    expect(lines.some((l) => l.startsWith('sandboxed: yes'))).toBe(true);
  });

  it('says loudly when the command would run without a sandbox', async () => {
    const p = await preview(shellTool, { command: 'make' }, { sandboxed: false });
    expect(p.summary).toBe('1 command, NOT sandboxed, no network');
    expect(p.text).toMatch(/^sandboxed: NO \(bubblewrap is unavailable here/m);
    expect(p.text).toContain('environment (names only): HOME PATH\n');
  });
});

describe('previewCall', () => {
  it('a tool without a preview shows its plan: paths, network and the arguments as JSON', async () => {
    const tool = { ...writeFileTool, preview: undefined };
    const p = await preview(tool, { path: 'src/a.txt', content: 'hi' });
    expect(p).toMatchObject({ kind: 'input', summary: 'write_file on src/a.txt', truncated: false });
    expect(p.fallback).toBeUndefined();
    expect(p.text).toContain('writes: src/a.txt\nnetwork: no\narguments:\n{\n  "path": "src/a.txt",');
  });

  it('a preview that throws or hangs does not fail: the plan is shown and why', async () => {
    const throwing = { ...writeFileTool, preview: () => Promise.reject(new Error('disk on fire')) };
    const p = await preview(throwing, { path: 'src/a.txt', content: 'hi' });
    expect(p).toMatchObject({ kind: 'input', fallback: 'write_file could not show this call (disk on fire); this is its plan' });
    let aborted = false;
    const hanging = {
      ...writeFileTool,
      preview: (_: unknown, ctx: { signal: AbortSignal }) =>
        new Promise<never>(() => ctx.signal.addEventListener('abort', () => (aborted = true))),
    };
    const late = await preview(hanging as ToolDefinition<unknown>, { path: 'src/a.txt', content: 'hi' }, { timeoutMs: 50 });
    expect(late.fallback).toBe('write_file could not show this call (it took longer than 50 ms); this is its plan');
    expect(aborted).toBe(true);
  });

  it('bounds the text at 16 KiB on a line end and says what was left out', async () => {
    const content = Array.from({ length: 3000 }, (_, i) => `a line of the new file, number ${i}`).join('\n');
    const p = await preview(writeFileTool, { path: 'src/slug.js', content });
    expect(Buffer.byteLength(p.text)).toBeLessThanOrEqual(PREVIEW_TEXT_BYTES);
    expect(p.truncated).toBe(true);
    expect(p.omitted).toMatch(/^\d+ more lines \(\d+ bytes\) not shown: the preview is cut at 16384 bytes$/);
    // whole lines only
    expect(p.text.split('\n').at(-1)).toMatch(/^\+a line of the new file, number \d+$/);
  });

  it('boundText cuts a single over-long line on a character boundary', () => {
    const cut = boundText('é'.repeat(100), 51);
    expect(cut.text).toBe('é'.repeat(25));
    expect(cut.omitted).toBe('150 more bytes not shown: the preview is cut at 51 bytes');
    expect(boundText('short', 51)).toEqual({ text: 'short' });
  });
});
