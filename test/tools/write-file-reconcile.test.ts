// write_file's recovery on real files: the preimage its start records, then what its reconcile
// says after each way a crash can leave the file (never written, written, changed by someone else).
import { mkdtemp, readdir, realpath, rm, writeFile, unlink, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeFileTool, type WriteFileInput } from '../../src/tools/builtins/write-file.js';
import { executeTool } from '../../src/tools/execute.js';
import type { ReconcileVerdict } from '../../src/tools/tool.js';
import { toolContext } from './context.js';

let ws: string;

beforeEach(async () => {
  ws = await realpath(await mkdtemp(path.join(tmpdir(), 'actorloop-wf-reconcile-')));
  await mkdir(path.join(ws, 'src'));
  await writeFile(path.join(ws, 'src', 'a.txt'), 'old\n');
});
afterEach(async () => {
  await rm(ws, { recursive: true, force: true });
});

/** What the call's tool/start records, taken as the runtime takes it. */
function preimage(input: WriteFileInput): unknown {
  // through JSON, as the log stores it
  return JSON.parse(JSON.stringify(writeFileTool.preimage!(input, { workspace: ws })));
}

function reconcile(input: WriteFileInput, recorded: unknown): Promise<ReconcileVerdict> {
  return writeFileTool.reconcile!(input, {
    workspace: ws, callId: 'call_1', idempotencyKey: 'k', epoch: 2, preimage: recorded,
    signal: new AbortController().signal, logger: pino({ level: 'silent' }),
  });
}

async function write(input: WriteFileInput): Promise<void> {
  const r = await executeTool(writeFileTool, input, toolContext(ws), 10_000);
  expect(r.ok, String(r.output)).toBe(true);
}

describe('write_file reconcile', () => {
  const existing = { path: 'src/a.txt', content: 'new\n' };
  const created = { path: 'src/new/b.txt', content: 'hello\n' };

  it('a write that never ran, over an existing file: not applied', async () => {
    expect(await reconcile(existing, preimage(existing))).toEqual({ status: 'not_applied' });
  });

  it('a write that never ran, of a new file: not applied', async () => {
    expect(await reconcile(created, preimage(created))).toEqual({ status: 'not_applied' });
  });

  it('a write that ran: applied, with the output execute gives', async () => {
    for (const input of [existing, created]) {
      const before = preimage(input);
      await write(input);
      expect(await reconcile(input, before)).toEqual({ status: 'applied', output: `wrote ${Buffer.byteLength(input.content)} bytes to ${input.path}` });
    }
  });

  it('a write that ran, then someone else wrote the file: unknown', async () => {
    const before = preimage(existing);
    await write(existing);
    await writeFile(path.join(ws, 'src', 'a.txt'), 'someone else\n');
    expect(await reconcile(existing, before)).toMatchObject({ status: 'unknown', reason: expect.stringContaining('changed since the call started') });
  });

  it('a write that ran, then the old content was put back: unknown, not "not applied" (another inode)', async () => {
    const before = preimage(existing);
    await write(existing);
    await write({ path: existing.path, content: 'old\n' });
    expect(await reconcile(existing, before)).toMatchObject({ status: 'unknown' });
  });

  it('a new file written, then deleted: unknown (its directory changed), never a second run', async () => {
    const input = { path: 'src/c.txt', content: 'c\n' };
    const before = preimage(input);
    await write(input);
    await unlink(path.join(ws, 'src', 'c.txt'));
    expect(await reconcile(input, before)).toMatchObject({ status: 'unknown' });
  });

  it('a crash between its temp file and the rename: the old file is untouched, not applied', async () => {
    const before = preimage(existing);
    // what replaceFileAtomic leaves when it dies before renaming
    await writeFile(path.join(ws, 'src', '.a.txt.0123456789ab.tmp'), 'new\n');
    expect(await reconcile(existing, before)).toEqual({ status: 'not_applied' });
    expect((await readdir(path.join(ws, 'src'))).sort()).toEqual(['.a.txt.0123456789ab.tmp', 'a.txt']);
  });

  it('no preimage recorded: applied when the content is there, else unknown', async () => {
    expect(await reconcile(existing, undefined)).toMatchObject({ status: 'unknown', reason: expect.stringContaining('no preimage') });
    await write(existing);
    expect(await reconcile(existing, undefined)).toMatchObject({ status: 'applied' });
  });

  it('records nothing for a path outside the workspace (the write refuses it anyway)', () => {
    expect(writeFileTool.preimage!({ path: '../x.txt', content: '' }, { workspace: ws })).toBeUndefined();
  });
});
