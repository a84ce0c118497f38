// A host with no NATS at all: the supervisor on the in-memory ports and the in-memory lease store
// claims an agent when mail arrives for it and when a command asks (a claim request), and runs
// its turn, as `actorloop host` does on JetStream.
import { pino } from 'pino';
import { afterEach, expect, it } from 'vitest';
import { Host } from '../../src/actors/hosting/host.js';
import { createMemoryLeaseStore } from '../../src/bus/memory-leases.js';
import { newId } from '../../src/protocol/ids.js';
import { turnRequest, type TestRuntime } from '../helpers/runtime.js';
import { actorTestWorld, message, ofType, waitForLog } from './harness.js';

const world = actorTestWorld();
const hosts: Host[] = [];
afterEach(async () => {
  for (const h of hosts.splice(0)) await h.drain();
});

async function startHost() {
  const rt = await world.rts.open({ script: [{ content: 'done' }] });
  const supervisor = rt.supervisor();
  const host = new Host({
    name: `host-${hosts.length}`, supervisor, leases: createMemoryLeaseStore(), directory: rt.ports.directory, logger: pino({ level: 'silent' }),
  });
  hosts.push(host);
  await host.start();
  return { rt, supervisor, host };
}

/** An agent registered as a command hands one over: in the directory, running, no host yet. */
async function register(rt: TestRuntime): Promise<string> {
  const actorId = newId('agent');
  const now = new Date().toISOString();
  await rt.ports.directory.put({
    actorId, kind: 'agent', parentId: null, rootId: actorId, status: 'running', title: 't', workspace: world.ws,
    createdAt: now, updatedAt: now, labels: {},
  });
  return actorId;
}

it('claims an agent when mail arrives for it, and runs its turn', async () => {
  const { rt, supervisor, host } = await startHost();
  const actorId = await register(rt);
  await rt.ports.inbox.publish(message(actorId, 'hello', { request: turnRequest(world.ws) }), 'person');
  const log = await waitForLog(supervisor, { rootId: actorId, actorId }, (l) => ofType(l, 'turn/end').length === 1);
  expect(ofType(log, 'turn/end')[0]!.data).toMatchObject({ outcome: 'completed' });
  expect(host.actors()).toContain(actorId);
});

it('claims an agent a command asks for with no new mail', async () => {
  const { rt, host } = await startHost();
  const actorId = await register(rt);
  rt.ports.inbox.requestClaim(actorId);
  const until = Date.now() + 5_000;
  while (!host.actors().includes(actorId) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  expect(host.actors()).toContain(actorId);
});
