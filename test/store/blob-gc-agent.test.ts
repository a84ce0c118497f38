import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Objm, StorageType, type ObjectStore } from '@nats-io/obj';
import { BLOB_BUCKET } from '../../src/bus/subjects.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { blobRefs } from '../../src/store/blob-refs.js';
import { collectBlobGarbage, jetStreamLogScan } from '../../src/store/blob-gc.js';
import { echoTool } from '../actors/agent-fixture.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { openTestRuntime, readLog, runTurn, turnRequest, type NatsTestRuntime } from '../helpers/runtime.js';

/** A blob's bytes rebuilt from the bucket alone: whole, or a continuation over its chain of bases. */
async function rebuild(os: ObjectStore, digest: string, hops = 0): Promise<Buffer | null> {
  const whole = await os.getBlob(digest);
  if (whole) return Buffer.from(whole);
  const record = await os.getBlob(`delta:${digest}`);
  if (!record || hops > 32) return null;
  const nl = record.indexOf(10);
  const header = JSON.parse(Buffer.from(record.subarray(0, nl)).toString('utf8')) as { base: string; bytes: number };
  const base = await rebuild(os, header.base, hops + 1);
  return base ? Buffer.concat([base.subarray(0, header.bytes), Buffer.from(record.subarray(nl + 1))]) : null;
}

describe('gc over the logs a real agent wrote', () => {
  let nats: TestNats;
  let rt: NatsTestRuntime;
  let ws: string;
  beforeAll(async () => {
    nats = await startTestNats();
    ws = await tempDir('ws');
    rt = await openTestRuntime({
      natsUrl: nats.url,
      tools: [echoTool],
      script: [
        { tool_calls: [{ id: 'e1', name: 'echo', arguments: { text: 'one' } }] },
        { tool_calls: [{ id: 'e2', name: 'echo', arguments: { text: 'two' } }] },
        { tool_calls: [{ id: 'e3', name: 'echo', arguments: { text: 'three' } }] },
        { content: 'z'.repeat(100_000) },
      ],
    });
  });
  afterAll(async () => {
    await rt?.close();
    await nats?.stop();
    if (ws) await rm(ws, { recursive: true, force: true });
  });

  it('keeps every blob the agent needs, prepared requests stored as continuations with their bases, and removes only the orphan', async () => {
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'echo three times, then say a lot', turnRequest(ws, { tools: ['echo'] }));
    expect(ended.outcome).toBe('completed');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const named = [...new Set(log.flatMap((e) => blobRefs(e)))];
    // four prepared requests and the big answer
    expect(named.length).toBeGreaterThanOrEqual(5);

    // the bucket holds what the host's blob store holds, record for record, and one blob nothing names
    await rt.blobs.flush();
    const os = await new Objm(rt.bus.js).create(BLOB_BUCKET, { storage: StorageType.File });
    let deltas = 0;
    for (const { key, value } of rt.lmdb.blobs.getRange()) {
      if (key.startsWith('delta:')) deltas += 1;
      await os.putBlob({ name: key }, value);
    }
    expect(deltas, 'the later requests of the turn are continuations').toBeGreaterThan(0);
    const orphan = sha256Digest('a blob whose commit never landed');
    await os.putBlob({ name: orphan }, Buffer.from('a blob whose commit never landed'));

    const r = await collectBlobGarbage(os, jetStreamLogScan(rt.bus.js, rt.bus.jsm), { graceMs: 0, dryRun: false, now: () => Date.now() + 60_000 });
    expect(r.removed.map((o) => o.name)).toEqual([orphan]);
    expect(r.missing).toEqual([]);
    for (const d of named) {
      const bytes = await rebuild(os, d);
      expect(bytes && sha256Digest(bytes), `${d} rebuilds from the bucket alone`).toBe(d);
    }
  });
});
