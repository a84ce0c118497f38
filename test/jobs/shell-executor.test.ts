import { spawn } from 'node:child_process';
import { access, mkdir, mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  isProcessAlive,
  killOrphanGroup,
  OUTPUT_HIGH_WATER_BYTES,
  processGroupAlive,
  startShellJob,
  type OutputChunk,
  type ShellJobContext,
  type ShellJobSpec,
} from '../../src/jobs/shell-executor.js';
import { findBubblewrap } from '../../src/tools/sandbox.js';
import { killMarked, sleepers, sleepMarker, waitUntil } from '../helpers/processes.js';

const bwrap = await findBubblewrap(process.env.PATH);
const PARENT = fileURLToPath(new URL('../helpers/job-parent.ts', import.meta.url));
const HOST_ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/root', LANG: 'C.UTF-8' };

const exists = (p: string): Promise<boolean> =>
  access(p).then(
    () => true,
    () => false,
  );

let base: string;
let ws: string;
const markers = new Set<string>();
const marker = (): string => {
  const m = sleepMarker();
  markers.add(m);
  return m;
};

beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'actorloop-job-')));
  ws = path.join(base, 'ws');
  await mkdir(ws, { recursive: true });
});
afterEach(async () => {
  await killMarked(markers);
  markers.clear();
  await rm(base, { recursive: true, force: true });
});
afterAll(async () => {
  await killMarked(markers);
});

function ctx(bwrapPath: string | null): ShellJobContext {
  return { workspace: ws, env: HOST_ENV, sandbox: { bwrapPath, network: false, envAllow: [] } };
}

/** Starts a job whose sink records every chunk and when it came. */
async function start(spec: ShellJobSpec, bwrapPath: string | null, tailBytes?: number) {
  const chunks: (OutputChunk & { atMs: number })[] = [];
  const job = await startShellJob(spec, ctx(bwrapPath), { sink: { write: (c) => void chunks.push({ ...c, atMs: Date.now() }) }, tailBytes });
  const text = (stream?: 'stdout' | 'stderr') =>
    Buffer.concat(chunks.filter((c) => !stream || c.stream === stream).map((c) => c.bytes)).toString('utf8');
  return { job, chunks, text };
}

it('finds a working bubblewrap here (the sandboxed cases below need it)', () => {
  expect(bwrap).not.toBeNull();
});

describe.each([
  ['sandboxed', bwrap],
  ['not sandboxed', null],
] as const)('shell executor, %s', (_name, bwrapPath) => {
  it('streams lines printed over a second in order, and the tail holds the last ones', async () => {
    const { job, chunks, text } = await start({ command: 'for i in $(seq 1 10); do echo "line $i"; sleep 0.1; done' }, bwrapPath, 24);
    expect(job.sandboxed).toBe(bwrapPath !== null);
    // while it runs, the sink has had output and the tail shows it
    expect(await waitUntil(() => chunks.length > 0, 5_000)).toBe(true);
    expect(Buffer.from(job.tail()).toString('utf8')).toMatch(/^line \d+\n/);
    const r = await job.result;
    expect(r).toMatchObject({ exitCode: 0, signal: null, timedOut: false, cancelled: false, stray: false, outputError: null, sandboxed: bwrapPath !== null });
    const all = Array.from({ length: 10 }, (_, i) => `line ${i + 1}\n`).join('');
    expect(text()).toBe(all);
    expect(r.bytes).toBe(Buffer.byteLength(all));
    // chunks are contiguous, and came over time rather than at the end
    let offset = 0;
    for (const c of chunks) {
      expect(c.offset).toBe(offset);
      offset += c.bytes.length;
    }
    expect(chunks.at(-1)!.atMs - chunks[0]!.atMs).toBeGreaterThan(500);
    expect(r.durationMs).toBeGreaterThanOrEqual(900);
    const tail = Buffer.from(job.tail()).toString('utf8');
    expect(tail.length).toBeLessThanOrEqual(24);
    expect(all.endsWith(tail)).toBe(true);
    expect(tail).toContain('line 9\nline 10\n');
  });

  it('reports exit codes, and stderr as its own stream', async () => {
    expect(await (await start({ command: 'true' }, bwrapPath)).job.result).toMatchObject({ exitCode: 0, bytes: 0 });
    const failing = await start({ command: 'echo out; echo err >&2; exit 3' }, bwrapPath);
    expect(await failing.job.result).toMatchObject({ exitCode: 3, signal: null, cancelled: false });
    expect(failing.text('stdout')).toBe('out\n');
    expect(failing.text('stderr')).toBe('err\n');
  });

  it('a timeout stops the whole group', async () => {
    const m = marker();
    const { job, text } = await start({ command: `echo partial; sleep ${m} & sleep ${m}`, timeoutMs: 500, killGraceMs: 1_000 }, bwrapPath);
    const r = await job.result;
    expect(r).toMatchObject({ timedOut: true, cancelled: false, stray: false });
    expect(r.exitCode).not.toBe(0);
    expect(text()).toBe('partial\n');
    expect(await sleepers(m)).toEqual([]);
    expect(await processGroupAlive(job.pid)).toBe(false);
  });

  it('cancel of a sleep 30 leaves nothing of its group within the grace', async () => {
    const m = marker();
    const { job } = await start({ command: `sleep ${m}` }, bwrapPath);
    expect(await waitUntil(async () => (await sleepers(m)).length === 1, 5_000)).toBe(true);
    expect(await isProcessAlive(job.identity)).toBe(true);
    const t0 = Date.now();
    const r = await job.cancel(2_000);
    expect(Date.now() - t0).toBeLessThan(2_000 + 1_500);
    expect(r).toMatchObject({ cancelled: true, timedOut: false, stray: false });
    expect(await sleepers(m)).toEqual([]);
    expect(await isProcessAlive(job.identity)).toBe(false);
    // cancel again: the same result
    expect(await job.cancel()).toBe(r);
  });

  it('cancel of a shell that started a background child leaves neither', async () => {
    const m = marker();
    const { job } = await start({ command: `sleep ${m} & (sleep ${m}; echo) & wait` }, bwrapPath);
    expect(await waitUntil(async () => (await sleepers(m)).length === 2, 5_000)).toBe(true);
    const r = await job.cancel(1_000);
    expect(r).toMatchObject({ cancelled: true, stray: false });
    expect(await sleepers(m)).toEqual([]);
  });

  it('cancel sends SIGTERM first: a command that traps it cleans up and ends with its own code', async () => {
    const m = marker();
    const { job, text } = await start({ command: `trap 'echo cleaning; exit 7' TERM; echo ready; sleep ${m} & wait` }, bwrapPath);
    expect(await waitUntil(async () => (await sleepers(m)).length === 1 && text() === 'ready\n', 5_000)).toBe(true);
    const r = await job.cancel(5_000);
    expect(r).toMatchObject({ exitCode: 7, cancelled: true });
    expect(text()).toBe('ready\ncleaning\n');
    // the trap ended the shell, not its background sleep: the executor stopped that too
    expect(await sleepers(m)).toEqual([]);
  });

  it('a command that ignores SIGTERM is killed when the grace runs out', async () => {
    const m = marker();
    const { job } = await start({ command: `trap '' TERM; sleep ${m}` }, bwrapPath);
    expect(await waitUntil(async () => (await sleepers(m)).length === 1, 5_000)).toBe(true);
    const t0 = Date.now();
    const r = await job.cancel(400);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(350);
    expect(r).toMatchObject({ cancelled: true, stray: false });
    expect(await sleepers(m)).toEqual([]);
  });

  it('a slow sink slows the command instead of filling memory, and gets every byte in order', async () => {
    let written = 0;
    let most = 0;
    let job: Awaited<ReturnType<typeof startShellJob>> | undefined;
    job = await startShellJob({ command: 'head -c 4000000 /dev/zero | tr "\\0" a' }, ctx(bwrapPath), {
      sink: {
        write: async (c) => {
          expect(c.offset).toBe(written);
          expect(Buffer.from(c.bytes).every((b) => b === 0x61)).toBe(true);
          await new Promise((r) => setTimeout(r, 2));
          written += c.bytes.length;
          if (job) most = Math.max(most, job.bytes() - written);
        },
      },
    });
    const r = await job.result;
    expect(r).toMatchObject({ exitCode: 0, bytes: 4_000_000, outputError: null });
    expect(written).toBe(4_000_000);
    // a paused stream may still hand over what it had read: a chunk per stream past the high water
    expect(most).toBeLessThanOrEqual(OUTPUT_HIGH_WATER_BYTES + 256 * 1024);
  });

  it('a sink still behind when the command exits is waited for, not taken for an escaped process', async () => {
    let written = 0;
    // The first write takes 1.5 s: the rest of a little over the high water queues, the output is
    // paused, and the command exits with its last bytes in the pipe. killGraceMs 0: runProcess
    // gives up 1 s after the exit on pipes still open, unless the output flows again at the exit.
    const job = await startShellJob({ command: 'head -c 1100000 /dev/zero', killGraceMs: 0 }, ctx(bwrapPath), {
      sink: {
        write: async (c) => {
          if (written === 0) await new Promise((r) => setTimeout(r, 1_500));
          written += c.bytes.length;
        },
      },
    });
    expect(await job.result).toMatchObject({ exitCode: 0, bytes: 1_100_000, stray: false, outputError: null });
    expect(written).toBe(1_100_000);
  });

  it('a failing sink stops the writing, not the job', async () => {
    const job = await startShellJob({ command: 'echo one; sleep 0.2; echo two' }, ctx(bwrapPath), {
      sink: {
        write: () => {
          throw new Error('blob store unreachable');
        },
      },
    });
    const r = await job.result;
    expect(r).toMatchObject({ exitCode: 0, bytes: 8, outputError: { message: 'blob store unreachable' } });
    expect(Buffer.from(job.tail()).toString('utf8')).toBe('one\ntwo\n');
  });
});

describe('shell executor, boundaries', () => {
  it('refuses a cwd outside the workspace or missing, having started nothing', async () => {
    const m = marker();
    for (const cwd of ['..', '/etc', 'missing']) {
      const err = await startShellJob({ command: `sleep ${m}`, cwd }, ctx(bwrap), { sink: { write: () => undefined } }).catch((e: unknown) => e);
      expect([cwd, (err as { code?: string }).code]).toEqual([cwd, cwd === 'missing' ? 'tool.not_found' : 'tool.path_outside']);
    }
    expect(await sleepers(m)).toEqual([]);
  });

  it('runs in the same sandbox as shell: outside the workspace is read-only, secrets are stripped', async () => {
    // /var/tmp is writable on the host and read-only in the sandbox (the private /tmp would not tell)
    const outside = `/var/tmp/actorloop-job-escape-${path.basename(base)}`;
    const job = await startShellJob(
      { command: `touch ${outside} 2>/dev/null || echo read-only; echo "key=\${OPENAI_API_KEY:-none}"; touch inside && echo wrote` },
      { workspace: ws, env: { ...HOST_ENV, OPENAI_API_KEY: 'sk-secret' }, sandbox: { bwrapPath: bwrap, network: false, envAllow: [] } },
      { sink: { write: () => undefined } },
    );
    expect(await job.result).toMatchObject({ exitCode: 0, sandboxed: true });
    expect(Buffer.from(job.tail()).toString('utf8')).toBe('read-only\nkey=none\nwrote\n');
    expect(await exists(outside)).toBe(false);
    expect(await exists(path.join(ws, 'inside'))).toBe(true);
  });

  it('a sandboxed job dies with its host, even when the host is SIGKILLed', async () => {
    const m = marker();
    const parent = spawn(process.execPath, ['--import', 'tsx', PARENT, ws, bwrap!, `sleep ${m} & sleep ${m}; wait`], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      expect(await waitUntil(async () => (await sleepers(m)).length === 2, 15_000)).toBe(true);
      parent.kill('SIGKILL');
      expect(await waitUntil(async () => (await sleepers(m)).length === 0, 5_000)).toBe(true);
    } finally {
      parent.kill('SIGKILL');
    }
  }, 20_000);

  it('an unsandboxed job outlives its host; the next holder here finds it by identity and stops its group', async () => {
    const m = marker();
    const parent = spawn(process.execPath, ['--import', 'tsx', PARENT, ws, '', `sleep ${m} & sleep ${m}; wait`], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      let line = '';
      parent.stdout.on('data', (d: Buffer) => (line += d.toString('utf8')));
      expect(await waitUntil(async () => line.includes('\n') && (await sleepers(m)).length === 2, 15_000)).toBe(true);
      const identity = JSON.parse(line.split('\n')[0]!) as Parameters<typeof isProcessAlive>[0];
      parent.kill('SIGKILL');
      await waitUntil(() => parent.exitCode !== null || parent.signalCode !== null, 5_000);
      expect(await isProcessAlive(identity)).toBe(true);
      expect(await killOrphanGroup(identity, 2_000)).toBe(true);
      expect(await sleepers(m)).toEqual([]);
      expect(await isProcessAlive(identity)).toBe(false);
      // an identity of another boot is never taken for a live process
      expect(await isProcessAlive({ ...identity, bootId: 'another-boot' })).toBe(false);
    } finally {
      parent.kill('SIGKILL');
    }
  }, 20_000);
});
