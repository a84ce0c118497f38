import { beforeAll, describe, expect, it } from 'vitest';
import { Objm, StorageType, type ObjectStore } from '@nats-io/obj';
import { BLOB_BUCKET, logSubject } from '../../src/bus/subjects.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { draft, type EventDraft } from '../../src/protocol/events.js';
import { newId } from '../../src/protocol/ids.js';
import { collectBlobGarbage, jetStreamLogScan, type LogScan } from '../../src/store/blob-gc.js';
import { createJetStreamLog } from '../../src/store/jetstream-log.js';
import { useTestBus } from '../helpers/test-bus.js';

/** Stores `text` whole under its digest; returns the digest. */
async function putWhole(os: ObjectStore, text: string): Promise<string> {
  const digest = sha256Digest(text);
  await os.putBlob({ name: digest }, Buffer.from(text));
  return digest;
}

/** Stores `whole` as a continuation of `base` (whose text is `baseText`), as the blob store writes one. */
async function putDelta(os: ObjectStore, base: string, baseText: string, whole: string, chain: number): Promise<string> {
  const digest = sha256Digest(whole);
  const header = JSON.stringify({ base, bytes: Buffer.byteLength(baseText), chain });
  await os.putBlob({ name: `delta:${digest}` }, Buffer.concat([Buffer.from(`${header}\n`), Buffer.from(whole.slice(baseText.length))]));
  return digest;
}

const names = async (os: ObjectStore): Promise<string[]> => (await os.list()).filter((o) => !o.deleted).map((o) => o.name).sort();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('blob gc on a real nats-server', () => {
  const nats = useTestBus();
  let os: ObjectStore;
  let scan: LogScan;
  /** Between the old objects and the young ones: gc runs "now" = `youngFrom`, grace = half the gap. */
  let oldUntil = 0;
  let youngFrom = 0;
  const graceMs = 50;
  const named: Record<string, string> = {};
  const orphans: string[] = [];
  let youngDelta = '';
  let youngBase = '';
  let missing = '';

  beforeAll(async () => {
    const bus = nats.bus;
    os = await new Objm(bus.js).create(BLOB_BUCKET, { storage: StorageType.File });
    scan = jetStreamLogScan(bus.js, bus.jsm);
    // old objects: a prepared request stored as a chain of two continuations over a whole body,
    // a big answer, an artifact; and what no log names (a whole blob, a continuation and its base)
    const r1 = '{"messages":[1';
    const r2 = `${r1},2`;
    const r3 = `${r2},3]}`;
    named['r1'] = await putWhole(os, r1);
    named['r2'] = await putDelta(os, named['r1'], r1, r2, 1);
    named['r3'] = await putDelta(os, named['r2'], r2, r3, 2);
    named['answer'] = await putWhole(os, 'a'.repeat(70_000));
    named['artifact'] = await putWhole(os, 'line\n'.repeat(5_000));
    // a continuation whose base the bucket lost: kept, and reported, since it cannot be rebuilt
    named['broken'] = await putDelta(os, sha256Digest('a base that is gone'), 'a base that is gone', 'a base that is gone, and more', 1);
    const lostBase = await putWhole(os, 'an orphan base');
    orphans.push(lostBase, `delta:${await putDelta(os, lostBase, 'an orphan base', 'an orphan base, continued', 1)}`, await putWhole(os, 'never named'));
    // something in the bucket gc does not own: left alone
    await os.putBlob({ name: 'notes' }, Buffer.from('not a blob'));
    // the base of a continuation written later (below): old, named by no log, needed all the same
    youngBase = await putWhole(os, 'young base');
    oldUntil = Date.now();
    await sleep(4 * graceMs);
    youngFrom = Date.now();
    // young: a continuation no commit names yet (one in flight), over the old base it needs
    youngDelta = await putDelta(os, youngBase, 'young base', 'young base and more', 1);
    expect(youngFrom - oldUntil).toBeGreaterThan(2 * graceMs);

    missing = sha256Digest('lost before gc ran');
    const root = newId('agent');
    const child = newId('agent');
    const commit = async (actorId: string, drafts: EventDraft[]) =>
      createJetStreamLog({ js: bus.logJs, rootId: root, actorId, position: { seq: 0, streamSeq: 0 }, epoch: 1 }).commit(drafts);
    const scope = { turn: 'turn_1', step: 'step_1' };
    await commit(root, [
      draft('request/prepared', { digest: named['r3'], bytes: 20, messages: 1 }, scope),
      draft('request/prepared', { digest: named['broken'], bytes: 29, messages: 1 }, scope),
      draft('assistant/accepted', { content: 'a…', contentRef: { digest: named['answer'], bytes: 70_000 }, toolCalls: [], finishReason: 'stop' }, scope),
      draft('turn/end', {
        outcome: 'completed', reason: null, answer: 'a…', answerRef: { digest: missing, bytes: 1 }, steps: 1, toolCalls: 0,
        usage: { inputTokens: 1, outputTokens: 1, estimated: false },
      }, { turn: 'turn_1' }),
    ]);
    await commit(child, [draft('tool/result', {
      ok: true, output: 'preview', error: null, durationMs: 1,
      artifact: { id: 'art_1', digest: named['artifact'], bytes: 25_000, binary: false },
    }, { ...scope, call: 'call_1' })]);
  });

  // "now" is when the young objects were written: the old ones are past the grace period
  const now = () => youngFrom;

  it('a dry run lists what no log names and is past its grace, and removes nothing', async () => {
    const before = await names(os);
    const r = await collectBlobGarbage(os, scan, { graceMs, dryRun: true, now });
    expect(r.removed.map((o) => o.name).sort()).toEqual([...orphans].sort());
    expect(r.removedBytes).toBe(r.removed.reduce((n, o) => n + o.size, 0));
    expect(r.removedBytes).toBeGreaterThan(0);
    expect(await names(os)).toEqual(before);
    expect(r).toMatchObject({ keptNamed: 6, keptYoung: 2, commits: 2, events: 5, missing: [missing, named['broken']].sort() });
  });

  it('keeps what the logs name (a continuation with its whole chain of bases), young objects and the old bases they need; removes the rest', async () => {
    const r = await collectBlobGarbage(os, scan, { graceMs, dryRun: false, now });
    expect(r.removed.map((o) => o.name).sort()).toEqual([...orphans].sort());
    const left = await names(os);
    for (const o of orphans) expect(left).not.toContain(o);
    expect(left).toEqual([
      named['r1'], named['answer'], named['artifact'], youngBase, `delta:${named['r2']}`, `delta:${named['r3']}`, `delta:${named['broken']}`,
      `delta:${youngDelta}`, 'notes',
    ].sort());
    // what is kept still reads whole
    expect(Buffer.from((await os.getBlob(named['answer']!))!).toString()).toBe('a'.repeat(70_000));
    // a second run finds nothing more
    const again = await collectBlobGarbage(os, scan, { graceMs, dryRun: false, now });
    expect(again.removed).toEqual([]);
  });

  it('once the grace period is over, a young continuation no commit named goes, and so does the base only it needed', async () => {
    const later = () => youngFrom + 10 * graceMs + 1_000;
    const r = await collectBlobGarbage(os, scan, { graceMs, dryRun: false, now: later });
    expect(r.removed.map((o) => o.name).sort()).toEqual([youngBase, `delta:${youngDelta}`].sort());
    expect(await names(os)).toContain(`delta:${named['r3']}`);
  });

  it('keeps an object written again after the listing', async () => {
    const text = 'written twice';
    const digest = await putWhole(os, text);
    await sleep(4 * graceMs);
    const listedBucket = {
      list: () => os.list(),
      getBlob: (n: string) => os.getBlob(n),
      // between the listing and the removal its content comes again: a new object, a new mtime
      info: async (n: string) => {
        if (n === digest) await putWhole(os, text);
        return os.info(n);
      },
      delete: (n: string) => os.delete(n),
    };
    const r = await collectBlobGarbage(listedBucket, scan, { graceMs, dryRun: false, now: () => Date.now() });
    expect(r.removed.map((o) => o.name)).not.toContain(digest);
    expect(await names(os)).toContain(digest);
  });

  it('removes nothing when a commit of a log does not parse: it might name any blob', async () => {
    const orphan = await putWhole(os, 'orphan next to a bad commit');
    await nats.bus.js.publish(logSubject(newId('agent'), newId('agent')), '{"events":[{"type":"nonsense"}]}');
    const before = await names(os);
    await expect(collectBlobGarbage(os, scan, { graceMs: 0, dryRun: false, now: () => Date.now() + 60_000 }))
      .rejects.toThrow(/^the commit at stream seq \d+ of LOGS \(log\.agt_\w+\.agt_\w+\) does not parse, so what it names is not known/);
    expect(await names(os)).toEqual(before);
    expect(before).toContain(orphan);
  });
});
