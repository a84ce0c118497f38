// The gateway shows `killed` as soon as the holder of a running actor's lease dies, before any
// incarnation commits `actor/killed` (a death commits nothing). Over a real nats-server: a real
// `actorloop host` SIGKILLed mid-turn, a second host carrying the turn on, a real
// `actorloop run --in-process` (which holds its lease as `hostname:pid` and writes no host record)
// shown running while alive and killed once SIGKILLed, and the check's rules on the real buckets.
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import { LivenessCheck } from '../../src/server/actor-liveness.js';
import { emptyProjection, type Projection } from '../../src/store/projection.js';
import { REPO_ROOT, cliEnv } from '../helpers/cli.js';
import { tempDir } from '../helpers/nats.js';
import { openGatewayFixture, RpcClient, until, type GatewayFixture } from './gateway-fixture.js';

const usage = { input_tokens: 40, output_tokens: 4 };

let fx: GatewayFixture;
let gw: Gateway;
let scripts: string;
let ws: string;

beforeAll(async () => {
  fx = await openGatewayFixture();
  gw = await fx.gateway({ liveness: { leases: fx.rt.leases, hosts: fx.rt.hosts } });
  scripts = await tempDir('liveness-scripts');
  ws = await tempDir('liveness-ws');
  fx.dirs.push(scripts, ws);
}, 60_000);

afterAll(async () => {
  await fx?.stop();
}, 60_000);

async function script(name: string, responses: unknown[]): Promise<string> {
  const file = join(scripts, `${name}.json`);
  await writeFile(file, JSON.stringify({ responses }));
  return `scripted:${file}`;
}

async function statusOf(agentId: string): Promise<string | undefined> {
  const res = await fetch(`${gw.url}/v1/actors`);
  const { actors } = (await res.json()) as { actors: Array<{ id: string; status: string }> };
  return actors.find((a) => a.id === agentId)?.status;
}

async function hasEvent(agentId: string, type: string): Promise<boolean> {
  // a root agent: its own tree
  for await (const e of fx.rt.reader.read(agentId, agentId)) if (e.event.type === type) return true;
  return false;
}

describe('a host SIGKILLed mid-turn', () => {
  test('shows killed before any commit says so, then the second host carries the turn to its end', async () => {
    const a = await fx.host('liveness-host-a');
    const rpc = await RpcClient.open(`${gw.url.replace('http', 'ws')}/v1/rpc`);
    try {
      const model = await script('slow', [{ content: 'survived', delay_ms: 4000, usage }]);
      const { agentId } = await rpc.call('turn.submit', { task: 'Answer slowly.', model, cwd: ws });
      await until('the attempt to start on host A', () => hasEvent(agentId, 'attempt/start'));
      expect(await statusOf(agentId)).toBe('running');
      a.child.kill('SIGKILL');
      await a.exited;
      // the log still says running: nothing was committed by the death
      expect(await hasEvent(agentId, 'actor/killed')).toBe(false);
      await until('the gateway to say killed', async () => (await statusOf(agentId)) === 'killed');
      expect(await hasEvent(agentId, 'actor/killed')).toBe(false);
      const detail = (await (await fetch(`${gw.url}/v1/actors/${agentId}`)).json()) as { actor: { status: string } };
      expect(detail.actor.status).toBe('killed');
      // the runs list reads the same: a run whose host died is killed, and not over
      const { runs } = (await (await fetch(`${gw.url}/v1/runs?q=${agentId}`)).json()) as { runs: Array<{ id: string; status: string; endedAt: string | null }> };
      expect(runs).toEqual([expect.objectContaining({ id: agentId, status: 'killed', endedAt: null })]);
      await fx.host('liveness-host-b');
      await until('the turn to complete on host B', async () => (await statusOf(agentId)) === 'completed', 40_000);
      expect(await hasEvent(agentId, 'actor/killed')).toBe(true);
    } finally {
      await rpc.close();
    }
  }, 90_000);
});

describe('a command hosting its agent in-process', () => {
  test('is running while its process lives (no host record), killed once it is SIGKILLed', async () => {
    const dataDir = await tempDir('liveness-run');
    fx.dirs.push(dataDir);
    const model = await script('in-process', [{ content: 'slow answer', delay_ms: 60_000, usage }]);
    const child = spawn(process.execPath, ['bin/actorloop.js', 'run', 'answer slowly', '--in-process', '--model', model, '--cwd', ws, '--nats', fx.nats.url, '--data-dir', dataDir], {
      cwd: REPO_ROOT, env: cliEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
    child.stderr!.resume();
    try {
      const agentId = await until('the run to print its agent', () => /^(agt_\S+)$/m.exec(out)?.[1]);
      await until('the attempt to start in the command', () => hasEvent(agentId, 'attempt/start'));
      const lease = await fx.rt.leases.get(agentId, Date.now());
      expect(lease?.host).toBe(`${hostname()}:${child.pid}`);
      expect(await fx.rt.hosts.known(lease!.host)).toBeNull();
      // a few reads a while apart: alive, so running every time
      for (let i = 0; i < 5; i++) {
        expect(await statusOf(agentId)).toBe('running');
        await new Promise((r) => setTimeout(r, 300));
      }
      child.kill('SIGKILL');
      await exited;
      await until('the gateway to say killed', async () => (await statusOf(agentId)) === 'killed');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    }
  }, 60_000);
});

describe('the check on the real buckets', () => {
  const open = (id: string, extra: Partial<Projection> = {}): Projection => ({
    ...emptyProjection(id),
    openTurn: { id: 'turn_1', startedAt: new Date().toISOString(), steps: 0, toolCalls: 0 } as unknown as Projection['openTurn'],
    ...extra,
  });
  const identity = (name: string, pid: number) => ({ name, hostname: 'elsewhere', pid, startedAt: new Date().toISOString(), leaseTtlMs: 3000 });

  test('a live host record and lease: not killed; a stale record, a missing lease: killed', async () => {
    const now = Date.now();
    await fx.rt.hosts.announce(identity('live-host', 4242), now);
    await fx.rt.hosts.announce(identity('stale-host', 4343), now - 60_000);
    await fx.rt.leases.take('agt_liveness_live', 'live-host', now);
    await fx.rt.leases.take('agt_liveness_stale', 'stale-host', now);
    const check = new LivenessCheck({ leases: fx.rt.leases, hosts: fx.rt.hosts });
    expect(await check.killed('agt_liveness_live', open('agt_liveness_live'), 'running')).toBe(false);
    expect(await check.killed('agt_liveness_stale', open('agt_liveness_stale'), 'running')).toBe(true);
    expect(await check.killed('agt_liveness_none', open('agt_liveness_none'), 'running')).toBe(true);
    expect(await check.killed('agt_liveness_none', open('agt_liveness_none'), 'recovering')).toBe(true);
    // the holder an actor's summary names, by the same rule
    expect(await check.holder('agt_liveness_live')).toEqual({ host: 'live-host', alive: true, expiresAt: expect.any(String) });
    expect(await check.holder('agt_liveness_stale')).toMatchObject({ host: 'stale-host', alive: false });
    expect(Date.parse((await check.holder('agt_liveness_live'))!.expiresAt)).toBeGreaterThan(now);
    expect(await check.holder('agt_liveness_none')).toBeNull();
  });

  test('a death found stays shown while the log stands still, also once the next host holds the lease; the log moving ends it', async () => {
    const now = Date.now();
    await fx.rt.hosts.announce(identity('dying-host', 4545), now - 60_000);
    await fx.rt.hosts.announce(identity('next-host', 4646), now);
    const first = await fx.rt.leases.take('agt_liveness_takeover', 'dying-host', now - 60_000);
    expect(first).not.toBeNull();
    const deaths = new Map<string, number>();
    const at = (seq: number) => open('agt_liveness_takeover', { seq });
    expect(await new LivenessCheck({ leases: fx.rt.leases, hosts: fx.rt.hosts, deaths }).killed('agt_liveness_takeover', at(7), 'running')).toBe(true);
    expect(deaths.get('agt_liveness_takeover')).toBe(7);
    // the next host takes the lease (the old one is past its expiry) and has committed nothing yet
    expect(await fx.rt.leases.take('agt_liveness_takeover', 'next-host', now)).not.toBeNull();
    const fresh = new LivenessCheck({ leases: fx.rt.leases, hosts: fx.rt.hosts });
    expect(await fresh.killed('agt_liveness_takeover', at(7), 'running')).toBe(false);
    expect(await new LivenessCheck({ leases: fx.rt.leases, hosts: fx.rt.hosts, deaths }).killed('agt_liveness_takeover', at(7), 'running')).toBe(true);
    // its takeover commits: the log moves, the live holder speaks again
    expect(await new LivenessCheck({ leases: fx.rt.leases, hosts: fx.rt.hosts, deaths }).killed('agt_liveness_takeover', at(9), 'running')).toBe(false);
    expect(deaths.has('agt_liveness_takeover')).toBe(false);
  });

  test('no turn open, a turn let go on purpose, a parked turn nobody holds: not killed', async () => {
    const check = new LivenessCheck({ leases: fx.rt.leases, hosts: fx.rt.hosts });
    expect(await check.killed('agt_liveness_none', emptyProjection('agt_liveness_none'), 'running')).toBe(false);
    expect(await check.killed('agt_liveness_none', open('agt_liveness_none', { released: { epoch: 1, reason: 'drained' } }), 'running')).toBe(false);
    expect(await check.killed('agt_liveness_none', open('agt_liveness_none'), 'waiting')).toBe(false);
    expect(await check.killed('agt_liveness_none', open('agt_liveness_none'), 'completed')).toBe(false);
  });
});
