// The blobs `compose` wires: a host on a bus writes them to the Object Store with its LMDB as a
// cache, so a host with another data dir reads them, and uploads what an older data dir's LMDB
// held once; a client keeps to its own LMDB, reading what hosts of its data dir cached and
// nothing else, without failing.
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultTooling } from '../../src/actors/agent/tooling.js';
import { compose, type Composition } from '../../src/actors/composition.js';
import { createRuntime } from '../../src/actors/runtime.js';
import { createFaultInjector } from '../../src/actors/faults/faults.js';
import type { NatsRole } from '../../src/bus/nats-auth.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { createLmdbBlobStore } from '../../src/store/blob-port.js';
import { openLmdbStore } from '../../src/store/lmdb-store.js';
import { createToolRegistry } from '../../src/tools/registry.js';
import { demoWorkspace } from '../helpers/cli.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';

const logger = pino({ level: 'silent' });
let nats: TestNats;
const dirs: string[] = [];
beforeAll(async () => {
  nats = await startTestNats();
}, 30_000);
afterAll(async () => {
  await nats?.stop();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

async function dataDir(name: string): Promise<string> {
  const dir = await tempDir(`compose-${name}`);
  dirs.push(dir);
  return dir;
}

function open(dir: string, role: NatsRole = 'host'): Promise<Composition> {
  return compose({
    bus: { natsUrl: nats.url, dataDir: dir, logger, role },
    dataDir: dir,
    logger,
    tools: createToolRegistry([]),
    tooling: defaultTooling(),
    faults: createFaultInjector([]),
    modelFor: async () => {
      throw new Error('no model in this test');
    },
    pricing: () => null,
  });
}

describe('the blobs compose wires on a bus', () => {
  it('a host\'s blobs are read by a host with another data dir; a client reads its own LMDB and no further', async () => {
    const a = await open(await dataDir('a'));
    expect(a.blobs.shared).toBe(true);
    const text = `a big output ${Date.now()} `.repeat(5_000);
    const digest = await a.blobs.put(text);
    // the host's own data dir caches it: a client there reads it
    await a.blobs.flush();
    const clientHere = await open(a.lmdb!.path.replace(/\/lmdb$/, ''), 'client');
    expect(clientHere.blobs.shared).toBeFalsy();
    expect(clientHere.blobUpload).toBeNull();
    expect(await clientHere.blobs.getText(digest)).toBe(text);
    await clientHere.close();
    await a.close();

    const b = await open(await dataDir('b'));
    expect(await b.blobs.getText(digest)).toBe(text);
    await b.close();

    // a client elsewhere does not read the bucket (its login may not): it finds nothing, and says so by undefined
    const clientElsewhere = await open(await dataDir('c'), 'client');
    expect(await clientElsewhere.blobs.getText(digest)).toBeUndefined();
    await clientElsewhere.close();
  }, 60_000);

  it('uploads an older data dir\'s LMDB blobs on a host\'s first open, once', async () => {
    const old = await dataDir('old');
    const lmdb = openLmdbStore(old);
    const before = createLmdbBlobStore(lmdb, { batchMs: 1 });
    const bodies = [`written before blobs were on the bus ${Date.now()}`, `and another ${Date.now()}`];
    for (const body of bodies) await before.put(body);
    await before.flush();
    await lmdb.close();

    const first = await open(old);
    expect(await first.blobUpload).toMatchObject({ skipped: false, uploaded: 2 });
    await first.close();
    const second = await open(old);
    expect(await second.blobUpload).toMatchObject({ skipped: true });
    await second.close();

    const elsewhere = await open(await dataDir('new'));
    for (const body of bodies) expect(await elsewhere.blobs.getText(sha256Digest(body))).toBe(body);
    await elsewhere.close();
  }, 60_000);

  it('an agent whose big tool call lives in a blob continues on a host with another data dir', async () => {
    const a = await dataDir('agent-a');
    const b = await dataDir('agent-b');
    const ws = await demoWorkspace();
    dirs.push(ws);
    const script = join(a, 'script.json');
    // write_file arguments over 64 KiB are kept in the blob store, not the log
    const big = `${'a line of a big file\n'.repeat(5_000)}`;
    await writeFile(script, JSON.stringify({ responses: [
      { tool_calls: [{ name: 'write_file', arguments: { path: 'big.txt', content: big } }] }, { content: 'first' },
      { tool_calls: [{ name: 'list_dir', arguments: {} }] }, { content: 'second' },
    ] }));
    const first = await createRuntime({ dataDir: a, natsUrl: nats.url, model: `scripted:${script}` });
    const agent = await first.agent({ workspace: ws, approvalMode: 'auto-edit' });
    expect(await (await agent.send('write big.txt')).outcome).toMatchObject({ outcome: 'completed', answer: 'first' });
    await first.close();
    expect(await readFile(join(ws, 'big.txt'), 'utf8')).toBe(big);

    // another data dir: nothing of a's LMDB; the next request needs the blob-stored arguments
    const second = await createRuntime({ dataDir: b, natsUrl: nats.url });
    try {
      const again = await second.agent(agent.id);
      const next = await again.send('list the files');
      expect(await next.outcome).toMatchObject({ outcome: 'completed', answer: 'second' });
    } finally {
      await second.close();
    }
  }, 90_000);
});
