import { spawn } from 'node:child_process';
import { access, mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { shellTool, UNSANDBOXED_NOTICE, type ShellInput } from '../../src/tools/builtins/shell.js';
import { executeTool } from '../../src/tools/execute.js';
import { DEFAULT_MAX_OUTPUT_BYTES, findBubblewrap, sweepStaleTmpDirs } from '../../src/tools/sandbox.js';
import type { SandboxGrant, ToolContext } from '../../src/tools/tool.js';
import { killMarked, sleepers, sleepMarker, waitUntil } from '../helpers/processes.js';
import { toolContext } from './context.js';

const bwrap = await findBubblewrap(process.env.PATH);
const PARENT = fileURLToPath(new URL('../helpers/shell-parent.ts', import.meta.url));
const HOST_ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/root', LANG: 'C.UTF-8' };

let base: string;
let ws: string;
const markers = new Set<string>();
const marker = (): string => {
  const m = sleepMarker();
  markers.add(m);
  return m;
};

beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'actorloop-shell-')));
  ws = path.join(base, 'ws');
  await mkdir(path.join(ws, 'sub'), { recursive: true });
  await mkdir(path.join(base, 'outside'));
});
afterEach(async () => {
  await killMarked(markers);
  markers.clear();
  await rm(base, { recursive: true, force: true });
});
afterAll(async () => {
  await killMarked(markers);
});

function ctx(sandbox: Partial<SandboxGrant> = {}, over: Partial<ToolContext> = {}): ToolContext {
  return toolContext(ws, over.signal, { env: HOST_ENV, sandbox: { bwrapPath: bwrap, network: false, envAllow: [], ...sandbox }, ...over });
}

async function shell(input: ShellInput, c: ToolContext = ctx()) {
  const result = await executeTool(shellTool, shellTool.input.parse(input), c, 30_000);
  // A refused call (a ToolError before anything ran) is text; what the process wrote is bytes.
  if (result.error?.code !== 'tool.path_outside' && result.error?.code !== 'tool.not_found') {
    expect(result.output).toBeInstanceOf(Uint8Array);
  }
  return { ...result, text: Buffer.from(result.output).toString('utf8') };
}

const exists = (p: string): Promise<boolean> =>
  access(p).then(
    () => true,
    () => false,
  );

describe('shell tool definition', () => {
  it('declares execute level, manual recovery, the process resource and a strict input', () => {
    expect(shellTool.level).toBe('execute');
    expect(shellTool.executionSemantics({ command: 'ls' }, { workspace: ws })).toEqual({
      effects: 'possible',
      recovery: { kind: 'manual', on: 'ask' },
    });
    expect(shellTool.resources({ command: 'ls' }, { workspace: ws })).toEqual([{ key: 'process', mode: 'write' }]);
    expect(shellTool.input.safeParse({ command: 'ls', extra: 1 }).success).toBe(false);
    expect(shellTool.input.safeParse({ command: 'ls', timeout_ms: 600_001 }).success).toBe(false);
    expect(shellTool.input.safeParse({ command: 'ls', timeout_ms: 1.5 }).success).toBe(false);
    expect(shellTool.input.safeParse({ command: '' }).success).toBe(false);
  });

  it('plans the command and a lexically normalized cwd', () => {
    const plan = (input: ShellInput) => shellTool.plan!(input, { workspace: ws });
    expect(plan({ command: 'npm test' })).toEqual({
      tool: 'shell',
      version: '1',
      command: 'npm test',
      cwd: '.',
      paths: [],
      network: false,
      envNames: [],
    });
    expect(plan({ command: 'ls', cwd: './sub/../sub/' }).cwd).toBe('sub');
    expect(plan({ command: 'ls', cwd: path.join(ws, 'sub') }).cwd).toBe('sub');
    expect(plan({ command: 'ls', cwd: '../outside' }).cwd).toBe('../outside');
  });
});

describe('shell tool output', () => {
  // The host path: these only read and write inside the workspace.
  const host = () => ctx({ bwrapPath: null });

  it('renders the status line, stdout and a [stderr] section', async () => {
    const r = await shell({ command: 'echo hello; echo warn >&2' });
    expect(r.ok).toBe(true);
    expect(r.text).toBe(`${bwrap ? '' : `${UNSANDBOXED_NOTICE}\n`}exit code 0\nhello\n[stderr]\nwarn\n`);
  });

  it('says so on the first line when it ran without a sandbox', async () => {
    const r = await shell({ command: 'printf x' }, host());
    expect(r.text).toBe(`${UNSANDBOXED_NOTICE}\nexit code 0\nx\n`);
  });

  it('reports a non-zero exit as tool.exit_nonzero with the output', async () => {
    const r = await shell({ command: 'echo oops >&2; exit 3' }, host());
    expect(r.ok).toBe(false);
    expect(r.error?.code).toBe('tool.exit_nonzero');
    expect(r.text).toContain('exit code 3\n[stderr]\noops\n');
  });

  it('says (no output) when there was none', async () => {
    expect((await shell({ command: 'true' }, host())).text).toMatch(/exit code 0\n\(no output\)\n$/);
  });

  it('returns binary output as bytes', async () => {
    const r = await shell({ command: `printf '\\000\\001\\377'` }, host());
    const bytes = Buffer.from(r.output as Uint8Array);
    const start = bytes.indexOf('exit code 0\n') + 'exit code 0\n'.length;
    expect([...bytes.subarray(start, start + 3)]).toEqual([0, 1, 0xff]);
  });

  it('times out with tool.timeout and the partial output', async () => {
    const m = marker();
    const r = await shell({ command: `echo partial; sleep ${m}`, timeout_ms: 300 }, host());
    expect(r.ok).toBe(false);
    expect(r.error?.code).toBe('tool.timeout');
    expect(r.text).toMatch(/timed out after 300 ms.*\npartial\n$/);
    expect(await sleepers(m)).toEqual([]);
  });

  it('truncates output over the cap and says how much was dropped', async () => {
    const r = await shell({ command: 'yes | head -c 50000000' }, host());
    expect(r.ok).toBe(true);
    expect(r.output.length).toBeLessThan(DEFAULT_MAX_OUTPUT_BYTES + 1_000);
    expect(r.text).toContain(`[stdout truncated: showing the first ${DEFAULT_MAX_OUTPUT_BYTES} of 50000000 bytes;`);
  });

  it('runs in cwd, and refuses a cwd outside the workspace, through a symlink, or missing', async () => {
    expect((await shell({ command: 'pwd', cwd: 'sub' }, host())).text).toContain(`${path.join(ws, 'sub')}\n`);
    await symlink(path.join(base, 'outside'), path.join(ws, 'link'));
    for (const cwd of ['..', '/etc', 'link']) {
      const r = await shell({ command: 'touch escaped', cwd }, host());
      expect([cwd, r.error?.code]).toEqual([cwd, 'tool.path_outside']);
    }
    expect((await shell({ command: 'pwd', cwd: 'missing' }, host())).error?.code).toBe('tool.not_found');
    expect(await exists(path.join(base, 'outside', 'escaped'))).toBe(false);
  });

  it('abort kills the whole tree', async () => {
    const m = marker();
    const ac = new AbortController();
    const running = shellTool.execute({ command: `sleep ${m} & (sleep ${m}; echo) & wait` }, ctx({ bwrapPath: null }, { signal: ac.signal }));
    expect(await waitUntil(async () => (await sleepers(m)).length === 2, 5_000)).toBe(true);
    ac.abort();
    const r = await running;
    expect(r.error?.code).toBe('tool.cancelled');
    expect(await sleepers(m)).toEqual([]);
  });

  it('on abort waits for a process that ignores SIGTERM and closed its pipes, and kills it before it confirms', async () => {
    const m = marker();
    const ac = new AbortController();
    const command = `(trap '' TERM; exec sleep ${m} >/dev/null 2>&1 </dev/null) & wait`;
    const running = shellTool.execute({ command }, ctx({ bwrapPath: null }, { signal: ac.signal }));
    expect(await waitUntil(async () => (await sleepers(m)).length === 1, 5_000)).toBe(true);
    ac.abort();
    const r = await running;
    expect(r.error?.code).toBe('tool.cancelled');
    // confirmed only once nothing of its process group is left
    expect(await sleepers(m)).toEqual([]);
  });

  it('settles unconfirmed (tool.not_stopped) when a process left its group and outlives the kill', async () => {
    const m = marker();
    const ac = new AbortController();
    // setsid: a new session, out of reach of the group kill, holding the output pipe open
    const running = shellTool.execute({ command: `setsid sleep ${m} & wait` }, ctx({ bwrapPath: null }, { signal: ac.signal }));
    expect(await waitUntil(async () => (await sleepers(m)).length === 1, 5_000)).toBe(true);
    ac.abort();
    const r = await running;
    expect(r.error?.code).toBe('tool.not_stopped');
    expect(Buffer.from(r.output).toString('utf8')).toMatch(/could not confirm it stopped/);
  }, 15_000);

  it('through executeTool: an abort it confirms is cancelled, one it cannot is an unknown outcome', async () => {
    const m = marker();
    const run = async (command: string) => {
      const ac = new AbortController();
      const running = executeTool(shellTool, { command }, ctx({ bwrapPath: null }, { signal: ac.signal }), 60_000, { graceMs: 6_000 });
      expect(await waitUntil(async () => (await sleepers(m)).length >= 1, 5_000)).toBe(true);
      ac.abort('interrupted');
      return running;
    };
    expect(await run(`sleep ${m}`)).toMatchObject({ errorClass: 'cancelled', settled: true });
    expect(await run(`setsid sleep ${m} & wait`)).toMatchObject({ errorClass: 'unknown', settled: true });
  }, 20_000);
});

describe('shell tool environment', () => {
  const secrets = {
    ...HOST_ENV,
    OPENAI_API_KEY: 'sk-test-123',
    MY_SECRET: 's3',
    GH_TOKEN: 'ghp_abc',
    DB_PASSWORD: 'pw',
    ORDINARY: 'visible',
  };

  it.each([null, 'sandbox'])('hides secrets and keeps ordinary variables (%s)', async (mode) => {
    if (mode && !bwrap) return;
    const r = await shell({ command: 'env' }, ctx({ bwrapPath: mode ? bwrap : null }, { env: secrets }));
    const names = r.text.split('\n').map((l) => l.split('=')[0]);
    expect(names).toEqual(expect.arrayContaining(['PATH', 'HOME', 'ORDINARY']));
    for (const name of ['OPENAI_API_KEY', 'MY_SECRET', 'GH_TOKEN', 'DB_PASSWORD']) expect(names).not.toContain(name);
    expect(r.text).not.toMatch(/sk-test-123|ghp_abc/);
  });

  it('lets envAllow names through', async () => {
    const r = await shell({ command: 'echo "$GH_TOKEN/$MY_SECRET"' }, ctx({ envAllow: ['GH_TOKEN'] }, { env: secrets }));
    expect(r.text).toContain('ghp_abc/\n');
  });

  it('defaults PATH and HOME when the host has none', async () => {
    const r = await shell({ command: 'echo "$PATH|$HOME"' }, ctx({ bwrapPath: null }, { env: {} }));
    expect(r.text).toContain('/usr/bin');
    expect(r.text).toMatch(/\|\/tmp\n/);
  });
});

describe.skipIf(!bwrap)('shell tool under bubblewrap', () => {
  it('writes inside the workspace and nowhere else', async () => {
    const n = `${process.pid}-${Date.now()}`;
    const varTmp = await mkdtemp('/var/tmp/actorloop-shell-');
    const targets = [
      `/root/x-${n}`,
      `/etc/x-${n}`,
      `/var/tmp/x-${n}`,
      path.join(varTmp, 'x'),
      path.join(base, 'outside', 'x'),
      `/dev/shm/x-${n}`,
      `/usr/local/x-${n}`,
    ];
    try {
      const writes = targets.map((t) => `(echo x > ${t}) 2>/dev/null && echo "wrote ${t}"`).join('; ');
      const r = await shell({ command: `${writes}; echo in > inside.txt && mkdir -p sub/deep && touch sub/deep/f && echo done`, cwd: '.' });
      expect(r.ok).toBe(true);
      // /dev/shm is the sandbox's private /dev: writable there, never on the host.
      expect(r.text.split('\n').filter((l) => l.startsWith('wrote'))).toEqual([`wrote /dev/shm/x-${n}`]);
      for (const t of targets) expect([t, await exists(t)]).toEqual([t, false]);
      expect(await readFile(path.join(ws, 'inside.txt'), 'utf8')).toBe('in\n');
      expect(await exists(path.join(ws, 'sub', 'deep', 'f'))).toBe(true);
    } finally {
      await rm(varTmp, { recursive: true, force: true });
    }
  });

  it('reads the host read-only', async () => {
    const r = await shell({ command: 'test -r /etc/passwd && test ! -w /etc/passwd && echo ro' });
    expect(r.text).toBe('exit code 0\nro\n');
  });

  it('cannot reach the network unless granted', async () => {
    const server = net.createServer((c) => c.end());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as net.AddressInfo;
    try {
      const command = `exec 3<>/dev/tcp/127.0.0.1/${port} && echo connected`;
      const denied = await shell({ command });
      expect(denied.error?.code).toBe('tool.exit_nonzero');
      expect(denied.text).not.toContain('connected');
      const granted = await shell({ command }, ctx({ network: true }));
      expect(granted.text).toBe('exit code 0\nconnected\n');
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('dies with its parent, even when the parent is SIGKILLed', async () => {
    const m = marker();
    const parent = spawn(process.execPath, ['--import', 'tsx', PARENT, ws, bwrap!, `sleep ${m} & sleep ${m}; wait`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      expect(await waitUntil(async () => (await sleepers(m)).length === 2, 15_000)).toBe(true);
      const privateTmp = async () => (await readdir(tmpdir())).filter((n) => n.startsWith(`actorloop-sh-${parent.pid}-`));
      expect(await privateTmp()).toHaveLength(1);
      parent.kill('SIGKILL');
      expect(await waitUntil(async () => (await sleepers(m)).length === 0, 5_000)).toBe(true);
      // Its private /tmp outlived it (no cleanup runs after SIGKILL) until a sweep (here, or in a
      // concurrent test) removes it.
      await waitUntil(() => parent.exitCode !== null || parent.signalCode !== null, 5_000);
      await sweepStaleTmpDirs();
      expect(await privateTmp()).toEqual([]);
    } finally {
      parent.kill('SIGKILL');
    }
  });

  it('the timeout kills the sandboxed tree and keeps partial output', async () => {
    const m = marker();
    const r = await shell({ command: `echo partial; sleep ${m} & sleep ${m}`, timeout_ms: 300 });
    expect(r.error?.code).toBe('tool.timeout');
    expect(r.text).toContain('\npartial\n');
    expect(await sleepers(m)).toEqual([]);
  });
});
