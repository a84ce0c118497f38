import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifyLog } from '../../src/verify/verify.js';
import { hasCode } from '../../src/protocol/errors.js';
import { newId } from '../../src/protocol/ids.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, type MemoryTestWorld, type NatsTestWorld } from './harness.js';

const script = [
  // slow enough that a second incarnation takes over while the first still waits for it
  { tool_calls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'written\n' } }], delay_ms: 700 },
  { content: 'done' },
];

// Fencing is the log's promise: the same incarnations on the in-memory log and on JetStream (10071).
describe.each([
  ['in memory', () => actorTestWorld()],
  ['on a nats-server', () => actorTestWorld({ nats: true })],
] as Array<[string, () => MemoryTestWorld | NatsTestWorld]>)('%s', (_name, makeWorld) => {
  const world = makeWorld();
  const file = world.shared(() => ({ script }));

  it('a stale incarnation is refused by the log, stops, and starts no effect', async () => {
    const { rt } = file;
    const ws = world.ws;
    const first = rt.supervisor();
    const actorId = newId('agent');
    const stale = await first.create({ actorId, kind: 'agent', parentId: null, rootId: actorId, title: 't', workspace: ws, labels: {} });
    const staleEnded = stale.whenTurnEnds();
    await first.send({
      id: newId('message'), from: 'test', to: actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
      content: 'write it', request: turnRequest(ws), sentAt: new Date().toISOString(),
    });
    // wait until the first incarnation's model request is in flight
    while (!rt.commits.get(actorId)?.flat().some((e) => e.type === 'attempt/start')) await new Promise((r) => setTimeout(r, 20));

    // a second incarnation takes over (as a host would after the first one's lease expired)
    const second = rt.supervisor();
    let ended!: Promise<unknown>;
    const { actor: fresh, recovered } = await second.hydrate(actorId, (a) => {
      ended = a.whenTurnEnds();
    });
    expect(recovered).toBe(true);

    // the first incarnation's model answers; its next commit (tool/start) is refused: fenced
    await expect(staleEnded).rejects.toSatisfy((err: unknown) => hasCode(err, 'store.fenced'));
    expect(hasCode(stale.failed, 'store.fenced')).toBe(true);

    await expect(ended).resolves.toMatchObject({ outcome: 'completed', answer: 'done' });
    expect(fresh.failed).toBeNull();
    const log = await readLog(second, actorId, actorId);
    expect(verifyLog(log, { complete: true })).toEqual([]);
    // the stale incarnation wrote nothing after the takeover, and the effect ran once
    const epochs = log.map((e) => e.epoch);
    expect(Math.max(...epochs.slice(0, epochs.indexOf(2)))).toBe(1);
    expect(log.slice(epochs.indexOf(2)).every((e) => e.epoch === 2)).toBe(true);
    expect(log.filter((e) => e.type === 'tool/start')).toHaveLength(1);
    expect(await readFile(join(ws, 'out.txt'), 'utf8')).toBe('written\n');
  });
});
