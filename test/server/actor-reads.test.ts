// The gateway's reads keep each tree's fold between requests and move it on: over a real
// nats-server, logs committed through the real JetStream writer, a second `GET /v1/actors` after
// new commits answers the new state, the same answer a gateway folding from the start gives;
// `?root=` (and `actors.list {rootId}`) keeps to one tree.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { DirectoryEntry } from '../../src/bus/directory.js';
import type { EventDraft } from '../../src/protocol/events.js';
import { createJetStreamLogs } from '../../src/store/jetstream-log.js';
import type { ActorLogWriter } from '../../src/store/log-port.js';
import { LogBuilder } from '../actors/log-builder.js';
import { openGatewayFixture, RpcClient, type GatewayFixture } from './gateway-fixture.js';

const ROOT_A = 'agt_01READSR00TA0000000000000A';
const ROOT_B = 'agt_01READSR00TB0000000000000B';

let fx: GatewayFixture;

beforeAll(async () => {
  fx = await openGatewayFixture();
}, 60_000);

afterAll(async () => {
  await fx?.stop();
}, 60_000);

function entry(actorId: string): DirectoryEntry {
  const at = new Date().toISOString();
  return { actorId, kind: 'agent', parentId: null, rootId: actorId, status: 'running', title: actorId, workspace: '/tmp/ws', createdAt: at, updatedAt: at, labels: {} };
}

/** A root agent's log: a writer on it, and the builder whose new events each `commit` sends. */
async function rootLog(actorId: string): Promise<{ b: LogBuilder; commit: () => Promise<void> }> {
  await fx.rt.bus.directory.put(entry(actorId));
  const logs = createJetStreamLogs({ publisher: fx.rt.bus.logJs, js: fx.rt.bus.js, jsm: fx.rt.bus.jsm });
  const writer: ActorLogWriter = logs.writer({ rootId: actorId, actorId, position: { seq: 0, streamSeq: 0 }, epoch: 1 });
  const b = new LogBuilder();
  let sent = 0;
  return {
    b,
    async commit() {
      const drafts = b.events.slice(sent).map(({ type, data, turn, step, attempt, call }) => ({ type, data, turn, step, attempt, call }) as EventDraft);
      sent = b.events.length;
      await writer.commit(drafts);
    },
  };
}

async function actors(url: string, query = ''): Promise<any[]> {
  const res = await fetch(`${url}/v1/actors${query}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { actors: any[] }).actors;
}

describe('GET /v1/actors with the folds kept', () => {
  test('a second request after new commits answers the new state, as a gateway folding from the start does', async () => {
    const a = await rootLog(ROOT_A);
    const bLog = await rootLog(ROOT_B);
    a.b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt();
    await a.commit();
    bLog.b.receive('msg_1').startTurn('msg_1');
    await bLog.commit();
    const gw = await fx.gateway();

    const first = await actors(gw.url);
    const rootA = first.find((x) => x.id === ROOT_A);
    expect(rootA).toMatchObject({ status: 'running', step: 1, tokens: 0 });

    // the attempt ends, the turn too: 120 tokens spent
    a.b.endAttempt().answer('Done.').endStep('final').endTurn('completed');
    await a.commit();
    const second = await actors(gw.url);
    const rootA2 = second.find((x) => x.id === ROOT_A);
    expect(rootA2).toMatchObject({ status: 'completed', step: null, tokens: 240 });
    expect(rootA2.streamSeq).toBeGreaterThan(rootA.streamSeq);
    // the detail reads the same kept fold
    const detail = (await (await fetch(`${gw.url}/v1/actors/${ROOT_A}`)).json()) as any;
    expect(detail).toMatchObject({ turns: 1, openTurn: null, lastTurn: { outcome: 'completed' } });

    // a gateway that never read these trees folds them from their first commit: the same answer
    const fresh = await fx.gateway();
    expect(await actors(fresh.url)).toEqual(second);

    // and the kept fold goes on again after more commits to the other tree
    bLog.b.startStep(1).startAttempt().endAttempt();
    await bLog.commit();
    const third = await actors(gw.url);
    expect(third.find((x) => x.id === ROOT_B)).toMatchObject({ status: 'running', step: 1, tokens: 120 });
    expect(third).toEqual(await actors(fresh.url));
  });

  test('?root= and actors.list {rootId} keep to one tree; an unknown root has no actors', async () => {
    const gw = await fx.gateway();
    const onlyB = await actors(gw.url, `?root=${ROOT_B}`);
    expect(onlyB.map((x) => x.id)).toEqual([ROOT_B]);
    expect(await actors(gw.url, '?root=agt_01N0SXCHR00T0000000000000X')).toEqual([]);
    const rpc = await RpcClient.open(`${gw.url.replace('http', 'ws')}/v1/rpc`);
    try {
      expect((await rpc.call('actors.list', { rootId: ROOT_A })).actors.map((x: { id: string }) => x.id)).toEqual([ROOT_A]);
      expect((await rpc.call('actors.list')).actors.map((x: { id: string }) => x.id).sort()).toEqual([ROOT_A, ROOT_B].sort());
    } finally {
      await rpc.close();
    }
    const bad = await fetch(`${gw.url}/v1/actors?root=`);
    expect(bad.status).toBe(400);
  });
});
