// Who may touch the blob bucket (design §11a), on a server run with the embedded server's
// authorization: the host login reads and writes it; the client login can neither write an
// object, nor read one (stream gets, direct gets, a consumer, a subscription), nor purge or delete
// the bucket's stream.
import { rm } from 'node:fs/promises';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { Objm } from '@nats-io/obj';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureEmbeddedAuth, writeServerConfig, type EmbeddedAuth } from '../../src/bus/nats-auth.js';
import { startNatsServer, type NatsServerHandle } from '../../src/bus/nats-server.js';
import { BLOB_STREAM, blobChunkSubject, blobMetaSubject } from '../../src/bus/subjects.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { openBlobBus, type BlobBus } from '../helpers/blob-bus.js';
import { tempDir } from '../helpers/nats.js';

let dir: string;
let server: NatsServerHandle;
let auth: EmbeddedAuth;
let host: BlobBus;
let client: NatsConnection;
let hostJsm: JetStreamManager;
const secret = `a sensitive answer's salted payload ${Date.now()}`;
let digest: string;

beforeAll(async () => {
  dir = await tempDir('blob-perms');
  auth = await ensureEmbeddedAuth(`${dir}/nats`);
  const configFile = await writeServerConfig(`${dir}/nats`, auth);
  server = await startNatsServer({ storeDir: `${dir}/store`, configFile });
  host = await openBlobBus(server.url, { user: auth.host.user, pass: auth.host.pass });
  hostJsm = await jetstreamManager(host.nc);
  digest = await host.store().put(secret);
  client = await connect({ servers: server.url, user: auth.client.user, pass: auth.client.pass });
}, 30_000);
afterAll(async () => {
  await client?.close();
  await host?.close();
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** How many messages the bucket's stream holds (read with the host login). */
async function messages(): Promise<number> {
  return Number((await hostJsm.streams.info(BLOB_STREAM)).state.messages);
}

describe('the blob bucket\'s permissions', () => {
  it('lets the host login write and read it', async () => {
    expect(await host.store().getText(digest)).toBe(secret);
    const os = await new Objm(host.nc).open('blobs');
    expect(Buffer.from((await os.getBlob(digest))!).toString('utf8')).toBe(secret);
  });

  it('lets the client login write nothing to it', async () => {
    const before = await messages();
    const js = jetstream(client, { timeout: 2_000 });
    const forged = `forged ${Date.now()}`;
    await expect(js.publish(blobChunkSubject('FORGED'), forged)).rejects.toThrow();
    await expect(js.publish(blobMetaSubject(sha256Digest(forged)), '{}')).rejects.toThrow();
    client.publish(blobChunkSubject('FORGED2'), forged);
    await client.flush().catch(() => {});
    const jsm = await jetstreamManager(client, { timeout: 2_000 });
    await expect(jsm.streams.purge(BLOB_STREAM)).rejects.toThrow();
    await expect(jsm.streams.delete(BLOB_STREAM)).rejects.toThrow();
    await expect(jsm.streams.deleteMessage(BLOB_STREAM, 1)).rejects.toThrow();
    const info = (await hostJsm.streams.info(BLOB_STREAM)).config;
    await expect(jsm.streams.update(BLOB_STREAM, { ...info, max_age: 1_000_000_000 })).rejects.toThrow();
    expect(await messages()).toBe(before);
    expect((await hostJsm.streams.info(BLOB_STREAM)).config.max_age).toBe(0);
    expect(await host.store().getText(digest)).toBe(secret);
  });

  it('lets the client login read nothing of it', async () => {
    const jsm = await jetstreamManager(client, { timeout: 2_000 });
    await expect(jsm.streams.getMessage(BLOB_STREAM, { last_by_subj: blobMetaSubject(digest) })).rejects.toThrow();
    await expect(jsm.streams.getMessage(BLOB_STREAM, { seq: 1 })).rejects.toThrow();
    await expect(jsm.direct.getMessage(BLOB_STREAM, { last_by_subj: blobMetaSubject(digest) })).rejects.toThrow();
    // a consumer would deliver the stream's messages: none may be made, durable or not
    await expect(jsm.consumers.add(BLOB_STREAM, { durable_name: 'peek', ack_policy: 'none' as never })).rejects.toThrow();
    await expect(jsm.consumers.add(BLOB_STREAM, { ack_policy: 'none' as never })).rejects.toThrow();
    await expect(jetstream(client, { timeout: 2_000 }).consumers.get(BLOB_STREAM).then((c) => c.next({ expires: 1_000 }))).rejects.toThrow();
    const os = await new Objm(jetstream(client, { timeout: 2_000 })).open('blobs', false);
    await expect(os.getBlob(digest)).rejects.toThrow();

    // nor listen to what hosts write
    const heard: string[] = [];
    const refused: Error[] = [];
    const sub = client.subscribe('$O.blobs.>', { callback: (err, m) => void (err ? refused.push(err) : heard.push(m.subject)) });
    await client.flush();
    const more = await host.store().put(`written while a client listens ${Date.now()}`);
    expect(await host.store().has(more)).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    expect(heard).toEqual([]);
    expect(refused.map((e) => e.message).join('\n')).toMatch(/permissions violation for subscription/i);
    sub.unsubscribe();
  });
});
