import { chmod, mkdir, mkdtemp, readdir, realpath, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hasCode } from '../../src/protocol/errors.js';
import {
  bwrapArgs,
  DEFAULT_MAX_OUTPUT_BYTES,
  DEFAULT_PATH,
  findBubblewrap,
  findExecutable,
  isHiddenEnv,
  runProcess,
  sandboxEnv,
  type ProcessSandbox,
} from '../../src/tools/sandbox.js';
import { killMarked, sleepers, sleepMarker, waitUntil } from '../helpers/processes.js';

const bwrap = await findBubblewrap(process.env.PATH);
const env = { PATH: DEFAULT_PATH };
const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString('utf8');

let base: string;
let ws: string;
const markers = new Set<string>();
const marker = (): string => {
  const m = sleepMarker();
  markers.add(m);
  return m;
};

beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'actorloop-sandbox-')));
  ws = path.join(base, 'ws');
  await mkdir(ws);
});
afterEach(async () => {
  await killMarked(markers);
  markers.clear();
  await rm(base, { recursive: true, force: true });
});

describe('findExecutable / findBubblewrap', () => {
  it('finds an executable on PATH, skipping relative entries and non-executable files', async () => {
    const dir = path.join(base, 'bin');
    await mkdir(dir);
    await writeFile(path.join(dir, 'tool'), '#!/bin/sh\n');
    expect(await findExecutable('tool', dir)).toBeNull();
    await chmod(path.join(dir, 'tool'), 0o755);
    expect(await findExecutable('tool', `relative/bin::${dir}`)).toBe(path.join(dir, 'tool'));
    expect(await findExecutable('tool', undefined)).toBeNull();
  });

  it('returns null without bwrap on PATH, and for a bwrap that cannot create namespaces', async () => {
    expect(await findBubblewrap('')).toBeNull();
    expect(await findBubblewrap(undefined)).toBeNull();
    const dir = path.join(base, 'fake');
    await mkdir(dir);
    // Like bwrap in a container without user namespaces: installed, but every run fails.
    await writeFile(path.join(dir, 'bwrap'), '#!/bin/sh\necho "bwrap: No permissions to creating new namespace" >&2\nexit 1\n', { mode: 0o755 });
    expect(await findBubblewrap(dir)).toBeNull();
  });

  it('finds the installed bubblewrap (required in CI)', async () => {
    if (!process.env.CI && !bwrap) return; // a developer machine may lack it; CI must not
    expect(bwrap).toMatch(/\/bwrap$/);
    expect(await findBubblewrap(process.env.PATH)).toBe(bwrap);
  });
});

describe('sandboxEnv', () => {
  const host = {
    PATH: '/usr/bin',
    HOME: '/home/u',
    LANG: 'C.UTF-8',
    GIT_AUTHOR_NAME: 'A',
    OPENAI_API_KEY: 'sk-x',
    aws_secret_access_key: 'x',
    GH_TOKEN: 'ghp_x',
    DB_PASSWORD: 'x',
    MYSQL_PWD_PASSWD: 'x',
    GOOGLE_APPLICATION_CREDENTIALS: '/k.json',
    SSH_AUTH_SOCK: '/run/ssh',
    NPM_CONFIG__AUTH: 'x',
    SSH_PRIVATE_PATH: 'x',
    NATS_URL: 'nats://127.0.0.1:4222',
    ACTORLOOP_DATA_DIR: '/d',
    DATABASE_URL: 'postgres://app:hunter2@db/app',
    PLAIN_URL: 'https://example.com/a:b@c',
  };

  it('drops names that look secret and runtime internals, keeps the rest', () => {
    expect(Object.keys(sandboxEnv(host, [])).sort()).toEqual(['GIT_AUTHOR_NAME', 'HOME', 'LANG', 'PATH', 'PLAIN_URL']);
  });

  it('lets allowed names through, exactly', () => {
    const out = sandboxEnv(host, ['GH_TOKEN', 'NATS_URL', 'db_password']);
    expect(out.GH_TOKEN).toBe('ghp_x');
    expect(out.NATS_URL).toBe('nats://127.0.0.1:4222');
    expect(out.DB_PASSWORD).toBeUndefined();
  });

  it('hides a URL with a password whatever its name', () => {
    expect(isHiddenEnv('UPSTREAM', 'https://user:pw@git.example.com/x.git')).toBe(true);
    expect(isHiddenEnv('UPSTREAM', 'https://git.example.com/x.git')).toBe(false);
  });
});

describe('bwrapArgs', () => {
  const opts = { workspace: '/tmp/w', cwd: '/tmp/w/src', tmpDir: '/tmp/private', network: false, hide: ['/run'] };

  it('mounts a read-only root, private /tmp and masks first, the workspace last', () => {
    const args = bwrapArgs(opts);
    const s = args.join(' ');
    expect(s).toContain('--ro-bind / /');
    expect(s).toContain('--cap-drop ALL');
    expect(s).not.toContain('--share-net');
    expect(args.slice(-5)).toEqual(['--bind', '/tmp/w', '/tmp/w', '--chdir', '/tmp/w/src']);
    expect(s.indexOf('--bind /tmp/private /tmp')).toBeLessThan(s.indexOf('--bind /tmp/w'));
    expect(s.indexOf('--tmpfs /run')).toBeLessThan(s.indexOf('--bind /tmp/w'));
    expect(args).not.toContain('--setenv');
    // read-only paths cover the workspace's writable bind
    const ro = bwrapArgs({ ...opts, readOnly: ['/tmp/w/.git'] });
    expect(ro.slice(-8)).toEqual(['--bind', '/tmp/w', '/tmp/w', '--ro-bind', '/tmp/w/.git', '/tmp/w/.git', '--chdir', '/tmp/w/src']);
  });

  it('shares the network and name resolution only when granted', () => {
    const s = bwrapArgs({ ...opts, network: true }).join(' ');
    expect(s).toContain('--share-net');
    expect(s).toContain('--ro-bind-try /run/systemd/resolve /run/systemd/resolve');
  });
});

describe('runProcess on the host', () => {
  const run = (script: string, over: Partial<Parameters<typeof runProcess>[1]> = {}) =>
    runProcess(['bash', '-c', script], { cwd: ws, env, sandbox: null, ...over });

  it('reports exit code, signal and both streams', async () => {
    const r = await run('echo out; echo err >&2; exit 3');
    expect([r.exitCode, text(r.stdout), text(r.stderr), r.truncated]).toEqual([3, 'out\n', 'err\n', false]);
    const k = await run('kill -SEGV $$');
    expect([k.exitCode, k.signal]).toEqual([null, 'SIGSEGV']);
  });

  it('passes only the given environment', async () => {
    const r = await runProcess(['/usr/bin/env'], { cwd: ws, env: { ONLY: '1' }, sandbox: null });
    expect(text(r.stdout)).toBe('ONLY=1\n');
  });

  it('throws tool.spawn_failed when the program cannot start', async () => {
    const err = await runProcess(['/nonexistent/prog'], { cwd: ws, env, sandbox: null }).catch((e: unknown) => e);
    expect(hasCode(err, 'tool.spawn_failed')).toBe(true);
  });

  it('keeps the first maxOutputBytes, drains the rest, and stays bounded on 200 MB of output', async () => {
    const before = process.memoryUsage().rss;
    const r = await run('head -c 200000000 /dev/zero; echo done >&2');
    const grewMiB = (process.memoryUsage().rss - before) / 2 ** 20;
    expect(r.exitCode).toBe(0);
    expect(r.stdout.length).toBe(DEFAULT_MAX_OUTPUT_BYTES);
    expect(r.stdoutBytes).toBe(200_000_000);
    expect(r.truncated).toBe(true);
    expect(text(r.stderr)).toBe('done\n');
    // Buffering it all would grow by 200 MB or more; what is kept is 4 MiB plus transient chunks.
    expect(grewMiB).toBeLessThan(100);
  });

  it('on timeout returns the partial output and kills the tree', async () => {
    const m = marker();
    const r = await run(`echo started; sleep ${m} & sleep ${m}`, { timeoutMs: 300 });
    expect(r.timedOut).toBe(true);
    expect(text(r.stdout)).toBe('started\n');
    expect(await sleepers(m)).toEqual([]);
  });

  it('on abort kills background children too, and SIGKILLs what ignores SIGTERM', async () => {
    const m = marker();
    const ac = new AbortController();
    const running = run(`trap '' TERM; (trap '' TERM; sleep ${m}) & sleep ${m} & wait`, { signal: ac.signal, killGraceMs: 200 });
    expect(await waitUntil(async () => (await sleepers(m)).length === 2, 5_000)).toBe(true);
    ac.abort();
    const r = await running;
    expect(r.aborted).toBe(true);
    expect(await sleepers(m)).toEqual([]);
  });

  it('stops what the command left running in the background when it exits', async () => {
    const m = marker();
    const r = await run(`sleep ${m} & echo bye`);
    expect([r.exitCode, text(r.stdout)]).toEqual([0, 'bye\n']);
    expect(await sleepers(m)).toEqual([]);
  });

  it('does not start at all when already aborted', async () => {
    const ac = new AbortController();
    ac.abort();
    const r = await run(`touch started`, { signal: ac.signal });
    expect(r.aborted).toBe(true);
    expect(await readdir(ws)).toEqual([]);
  });
});

describe.skipIf(!bwrap)('runProcess under bubblewrap', () => {
  const box = (over: Partial<ProcessSandbox> = {}): ProcessSandbox => ({ bwrapPath: bwrap!, workspace: ws, network: false, ...over });
  const run = (script: string, over: Partial<Parameters<typeof runProcess>[1]> = {}) =>
    runProcess(['bash', '-c', script], { cwd: ws, env, sandbox: box(), ...over });

  it('runs in its own PID namespace with no capabilities, and cannot unmount its private /tmp', async () => {
    const r = await run('echo $$; grep CapEff /proc/self/status; umount -l /tmp 2>&1 || echo refused');
    expect(text(r.stdout)).toMatch(/^2\nCapEff:\s+0+\n.*\nrefused\n$/s);
  });

  it('gives a private, empty /tmp that is removed after the call', async () => {
    const visible = path.join(tmpdir(), `actorloop-host-visible-${process.pid}`);
    const scratch = `scratch-${process.pid}-${Date.now()}`;
    await writeFile(visible, 'x');
    try {
      const r = await run(`ls -A /tmp | grep -c actorloop-host-visible; echo s > /tmp/${scratch} && cat /tmp/${scratch}`);
      expect(text(r.stdout)).toBe('0\ns\n');
      // Other tests create their own private dirs meanwhile: look for this call's file, not a count.
      const left = (await readdir(tmpdir())).filter((n) => n.startsWith('actorloop-sh-'));
      for (const dir of left) expect(await readdir(path.join(tmpdir(), dir)).catch(() => [])).not.toContain(scratch);
    } finally {
      await rm(visible, { force: true });
    }
  });

  it('masks /run, so host sockets there cannot be reached', async () => {
    const sock = path.join('/run', `actorloop-test-${process.pid}.sock`);
    const server = net.createServer((c) => c.end('hello'));
    const listening = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(sock, () => resolve(true));
    });
    if (!listening) return; // /run not writable for this user: nothing to prove here
    try {
      const r = await run(`test -e ${sock} && echo visible || echo hidden`);
      expect(text(r.stdout)).toBe('hidden\n');
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('on abort kills the sandboxed tree', async () => {
    const m = marker();
    const ac = new AbortController();
    const running = run(`sleep ${m} & sleep ${m} & wait`, { signal: ac.signal });
    expect(await waitUntil(async () => (await sleepers(m)).length === 2, 5_000)).toBe(true);
    ac.abort();
    expect((await running).aborted).toBe(true);
    expect(await sleepers(m)).toEqual([]);
  });

  it('keeps .git (a directory or a worktree\'s file) and actorloop.toml read-only, the rest of the workspace writable', async () => {
    await mkdir(path.join(ws, '.git', 'hooks'), { recursive: true });
    await writeFile(path.join(ws, '.git', 'config'), '[core]\n');
    await writeFile(path.join(ws, 'actorloop.toml'), '');
    const r = await run([
      'echo x > .git/hooks/post-checkout || echo hook refused',
      'echo "[filter \\"x\\"]" >> .git/config || echo config refused',
      'mv .git .git-old || echo rename refused',
      'echo x >> actorloop.toml || echo toml refused',
      'echo ok > work.txt && cat work.txt',
    ].join('; '));
    expect(text(r.stdout)).toBe('hook refused\nconfig refused\nrename refused\ntoml refused\nok\n');
    expect(text(r.stderr)).toMatch(/Read-only file system/);
    expect(await readdir(path.join(ws, '.git', 'hooks'))).toEqual([]);

    const worktree = path.join(base, 'wt');
    await mkdir(worktree);
    await writeFile(path.join(worktree, '.git'), 'gitdir: /elsewhere\n');
    const w = await runProcess(['bash', '-c', 'rm -f .git || echo rm refused; echo gitdir: /mine > .git || echo write refused; cat .git'], {
      cwd: worktree, env, sandbox: box({ workspace: worktree }),
    });
    expect(text(w.stdout)).toBe('rm refused\nwrite refused\ngitdir: /elsewhere\n');
  });

  it('refuses a workspace that is the filesystem root', async () => {
    const err = await runProcess(['true'], { cwd: '/', env, sandbox: box({ workspace: '/' }) }).catch((e: unknown) => e);
    expect(hasCode(err, 'tool.sandbox_failed')).toBe(true);
  });
});

afterAll(async () => {
  await killMarked(markers);
});
