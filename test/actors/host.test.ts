// The host's claim and renewal passes against fakes: an in-memory lease store with the KV
// store's compare-and-set semantics (and a latency per call, so passes take as long as a real
// one over many leases), a directory, and a supervisor that records what it was asked to host.
import { pino } from 'pino';
import { afterEach, expect, test } from 'vitest';
import type { ActorDirectory, ActorStatus, DirectoryEntry } from '../../src/bus/directory.js';
import type { Lease, LeaseStore } from '../../src/bus/leases.js';
import { CLAIMS_IN_FLIGHT, Host } from '../../src/actors/hosting/host.js';
import type { Supervisor } from '../../src/actors/hosting/supervisor.js';
import { BusError } from '../../src/protocol/errors.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Held { host: string; revision: number; expiresAt: number }

/** Leases in memory: every write a CAS on the key's revision, a key past its expiry gone (max_age). */
class FakeLeases implements LeaseStore {
  readonly keys = new Map<string, Held>();
  private revision = 0;

  constructor(readonly ttlMs: number, private readonly latencyMs = 0) {}

  /** Another host writes the lease (a takeover elsewhere): the holder's next renewal fails its CAS. */
  hold(actorId: string, host: string, forMs = this.ttlMs): void {
    this.keys.set(actorId, { host, revision: ++this.revision, expiresAt: Date.now() + forMs });
  }

  private live(actorId: string, nowMs: number): Held | undefined {
    const held = this.keys.get(actorId);
    return held && held.expiresAt > nowMs ? held : undefined;
  }

  // the check and the write run in one turn of the event loop after the pause: atomic, like a CAS
  private write(actorId: string, host: string, nowMs: number): Lease {
    const held = { host, revision: ++this.revision, expiresAt: nowMs + this.ttlMs };
    this.keys.set(actorId, held);
    return { actorId, host, epoch: held.revision, expiresAt: held.expiresAt };
  }

  async take(actorId: string, host: string, nowMs: number): Promise<Lease | null> {
    await sleep(this.latencyMs);
    const held = this.live(actorId, nowMs);
    if (held && held.host !== host) return null;
    return this.write(actorId, host, nowMs);
  }

  async takeFrom(lease: Lease, host: string, nowMs: number): Promise<Lease | null> {
    await sleep(this.latencyMs);
    return this.keys.get(lease.actorId)?.revision === lease.epoch ? this.write(lease.actorId, host, nowMs) : null;
  }

  async renew(lease: Lease, nowMs: number): Promise<Lease> {
    await sleep(this.latencyMs);
    if (this.live(lease.actorId, nowMs)?.revision !== lease.epoch) {
      throw new BusError('bus.lease_lost', `the lease of ${lease.actorId} (epoch ${lease.epoch}) was lost`);
    }
    return this.write(lease.actorId, lease.host, nowMs);
  }

  async release(lease: Lease): Promise<void> {
    await sleep(this.latencyMs);
    if (this.keys.get(lease.actorId)?.revision === lease.epoch) this.keys.delete(lease.actorId);
  }

  async get(actorId: string, nowMs: number): Promise<Lease | null> {
    const held = this.live(actorId, nowMs);
    return held ? { actorId, host: held.host, epoch: held.revision, expiresAt: held.expiresAt } : null;
  }

  // A real listing of the bucket can wait out a 30 s consumer heartbeat when a key changes while
  // it is read: a host must not depend on it, so here it never answers.
  list(): Promise<Lease[]> {
    return new Promise(() => {});
  }
}

/** A supervisor that hosts nothing but records hydrations (with their epochs), evictions, and concurrency. */
class FakeSupervisor {
  readonly hydrated = new Map<string, number>();
  readonly evicted: string[] = [];
  inFlight = 0;
  maxInFlight = 0;
  stopped = false;

  constructor(private readonly hydrateMs = 0) {}

  async listenForMail(): Promise<void> {}

  async hydrate(actorId: string, _onHydrated: unknown, opts: { epoch?: number } = {}): Promise<unknown> {
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      await sleep(this.hydrateMs);
      this.hydrated.set(actorId, opts.epoch ?? 0);
      return {};
    } finally {
      this.inFlight -= 1;
    }
  }

  hostClaimed(actorId: string, epoch: number): Promise<unknown> {
    return this.hydrate(actorId, undefined, { epoch });
  }

  evict(actorId: string): void {
    this.evicted.push(actorId);
  }

  async quiesceTools(): Promise<void> {}

  async stop(): Promise<void> {
    this.stopped = true;
  }
}

function directoryOf(statuses: Array<[string, ActorStatus]>): ActorDirectory {
  const now = new Date().toISOString();
  const entries: DirectoryEntry[] = statuses.map(([actorId, status]) => ({
    actorId, kind: 'agent', parentId: null, rootId: actorId, status, title: 't', workspace: '/tmp', createdAt: now, updatedAt: now, labels: {},
  }));
  return {
    put: async () => 0,
    get: async (id) => entries.find((e) => e.actorId === id),
    list: async () => entries,
  };
}

const ids = (n: number, prefix = 'agt_') => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(4, '0')}`);
const hosts: Host[] = [];
function startHost(name: string, leases: FakeLeases, sup: FakeSupervisor, directory: ActorDirectory): Host {
  const host = new Host({
    name, leases, directory, supervisor: sup as unknown as Supervisor, logger: pino({ level: 'silent' }), drainToolsMs: 0,
  });
  hosts.push(host);
  return host;
}

async function until(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

afterEach(async () => {
  for (const h of hosts.splice(0)) await h.drain();
});

test('a host keeps hundreds of leases when one renewal after another would outlast a pass', async () => {
  // 300 leases × 3 ms a call: one at a time, a renewal pass takes ~900 ms, past the 200 ms between
  // passes and the 600 ms TTL; passes that overlapped renewed a lease twice and lost it to themselves
  const leases = new FakeLeases(600, 3);
  const sup = new FakeSupervisor();
  const actors = ids(300);
  const host = startHost('h1', leases, sup, directoryOf(actors.map((id) => [id, 'running'])));
  await host.start();
  await until('every actor hosted', () => sup.hydrated.size === actors.length);
  await sleep(1_500);
  expect(sup.evicted).toEqual([]);
  expect(host.actors().sort()).toEqual(actors);
  // still held, by this host, and renewed: each lease's revision moved past the one it was taken at
  for (const id of actors) {
    const held = leases.keys.get(id);
    expect(held?.host).toBe('h1');
    expect(held!.revision).toBeGreaterThan(sup.hydrated.get(id)!);
  }
}, 20_000);

test('a takeover claims every lapsed actor that needs a host, a bounded number at once, each at its lease revision', async () => {
  const leases = new FakeLeases(300);
  const sup = new FakeSupervisor(20);
  const lapsed = ids(CLAIMS_IN_FLIGHT + 40);
  const others = ['agt_live', 'agt_done', 'agt_stopped'];
  for (const id of lapsed) leases.hold(id, 'dead-host', 150);
  leases.hold('agt_live', 'other-host', 60_000);
  const directory = directoryOf([
    ...lapsed.map((id): [string, ActorStatus] => [id, 'running']),
    ['agt_live', 'running'], ['agt_done', 'completed'], ['agt_stopped', 'stopped'],
  ]);
  const host = startHost('h2', leases, sup, directory);
  await host.start();
  // nothing is free yet: the first pass takes nothing
  expect(sup.hydrated.size).toBe(0);
  await until('every lapsed actor hosted', () => sup.hydrated.size === lapsed.length);
  expect(sup.maxInFlight).toBeGreaterThan(1);
  expect(sup.maxInFlight).toBeLessThanOrEqual(CLAIMS_IN_FLIGHT);
  for (const id of lapsed) expect(sup.hydrated.get(id)).toBeGreaterThan(0);
  await sleep(400);
  // a live lease of another host, and actors with no work, stay where they are
  for (const id of others) expect(sup.hydrated.has(id)).toBe(false);
  expect(leases.keys.get('agt_live')?.host).toBe('other-host');
  expect(sup.evicted).toEqual([]);
}, 20_000);

test('mail for many unhosted actors at once claims them a bounded number at a time', async () => {
  const leases = new FakeLeases(5_000);
  const sup = new FakeSupervisor(10);
  const actors = ids(CLAIMS_IN_FLIGHT + 30);
  const host = startHost('h3', leases, sup, directoryOf([]));
  await host.start();
  const claimed = await Promise.all(actors.map((id) => host.claim(id, 'mail')));
  expect(claimed.every(Boolean)).toBe(true);
  expect(sup.maxInFlight).toBeLessThanOrEqual(CLAIMS_IN_FLIGHT);
  // a second claim of an actor this host holds does nothing
  expect(await host.claim(actors[0]!, 'mail')).toBe(false);
  expect(sup.hydrated.size).toBe(actors.length);
});

test('a lease another host took stops the actor here at the next renewal', async () => {
  const leases = new FakeLeases(600);
  const sup = new FakeSupervisor();
  const host = startHost('h4', leases, sup, directoryOf([['agt_a', 'running'], ['agt_b', 'running']]));
  await host.start();
  await until('both hosted', () => sup.hydrated.size === 2);
  leases.hold('agt_a', 'thief');
  await until('the actor evicted', () => sup.evicted.length > 0, 3_000);
  expect(sup.evicted).toEqual(['agt_a']);
  expect(host.actors()).toEqual(['agt_b']);
  expect(leases.keys.get('agt_a')?.host).toBe('thief');
});

test('drain stops the supervisor and releases every lease, none renewed after', async () => {
  const leases = new FakeLeases(600, 2);
  const sup = new FakeSupervisor();
  const actors = ids(50);
  const host = startHost('h5', leases, sup, directoryOf(actors.map((id) => [id, 'running'])));
  await host.start();
  await until('all hosted', () => sup.hydrated.size === actors.length);
  await sleep(250); // a renewal pass is likely in flight
  await host.drain();
  hosts.splice(hosts.indexOf(host), 1);
  expect(sup.stopped).toBe(true);
  expect(host.actors()).toEqual([]);
  expect([...leases.keys.keys()]).toEqual([]);
  await sleep(300);
  expect([...leases.keys.keys()]).toEqual([]);
});

test("the directory follows a hosted actor's commits, so a finished actor is not taken over again", async () => {
  const now = new Date().toISOString();
  const store = new Map<string, DirectoryEntry>([['agt_a', {
    actorId: 'agt_a', kind: 'agent', parentId: null, rootId: 'agt_a', status: 'running', title: 't', workspace: '/tmp', createdAt: now, updatedAt: now, labels: {},
  }]]);
  const writes: ActorStatus[] = [];
  const directory: ActorDirectory = {
    put: async (e) => {
      await sleep(Math.random() * 5); // out-of-order completion would show as a wrong last status
      writes.push(e.status);
      store.set(e.actorId, e);
      return writes.length;
    },
    get: async (id) => store.get(id),
    list: async () => [...store.values()],
  };
  const leases = new FakeLeases(300);
  const sup = new FakeSupervisor();
  const first = startHost('h-first', leases, sup, directory);
  first.committed('agt_a', [{ type: 'turn/start' }, { type: 'step/start' }]);
  first.committed('agt_a', [{ type: 'tool/call' }, { type: 'approval/requested' }]);
  first.committed('agt_a', [{ type: 'approval/granted' }]);
  first.committed('agt_a', [{ type: 'step/end' }, { type: 'turn/end', data: { outcome: 'completed' } }]);
  first.committed('agt_a', [{ type: 'tool/result' }]); // moves no status
  await first.drain(); // waits for the writes
  // 'running' at turn/start is skipped: the entry already says so
  expect(writes).toEqual(['waiting', 'running', 'completed']);
  expect(store.get('agt_a')?.status).toBe('completed');
  // its lease lapsed with its host: another host has nothing to take over
  leases.hold('agt_a', 'h-first', 50);
  const second = startHost('h-second', leases, sup, directory);
  await second.start();
  await sleep(300);
  expect(sup.hydrated.has('agt_a')).toBe(false);
}, 20_000);

test('a renewal whose outcome is unknown (a timeout through an election) stops the actor until a read of its lease takes it again', async () => {
  const leases = new FakeLeases(600);
  const sup = new FakeSupervisor();
  const host = startHost('h9', leases, sup, directoryOf([['agt_unknown', 'running']]));
  await host.start();
  await until('the actor hosted', () => sup.hydrated.has('agt_unknown'));
  const firstEpoch = sup.hydrated.get('agt_unknown')!;
  // the next renewal is not answered, nor is its read-back: the lease may or may not be ours
  const renew = leases.renew.bind(leases);
  let unanswered = 1;
  leases.renew = async (lease, nowMs) => {
    if (unanswered-- > 0) throw new BusError('bus.lease_unknown', `the lease of ${lease.actorId} may be lost`);
    return renew(lease, nowMs);
  };
  sup.hydrated.delete('agt_unknown');
  await until('the actor stopped', () => sup.evicted.includes('agt_unknown'));
  // the next claim pass reads the lease (still this host's), takes it with a new epoch and hosts the actor again
  await until('the actor hosted again', () => sup.hydrated.has('agt_unknown'));
  expect(sup.hydrated.get('agt_unknown')).toBeGreaterThan(firstEpoch);
  expect(leases.keys.get('agt_unknown')?.host).toBe('h9');
}, 20_000);
