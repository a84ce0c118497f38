import { PassThrough } from 'node:stream';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Objm, StorageType, type ObjectStore } from '@nats-io/obj';
import { BLOB_BUCKET, logSubject } from '../../src/bus/subjects.js';
import { main } from '../../src/cli/main.js';
import { EXIT } from '../../src/cli/exit-codes.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { draft } from '../../src/protocol/events.js';
import { newId } from '../../src/protocol/ids.js';
import { createJetStreamLog } from '../../src/store/jetstream-log.js';
import { tempDir } from '../helpers/nats.js';
import { useTestBus } from '../helpers/test-bus.js';

/** Runs `actorloop gc …` in this process against the test server; what it printed and its exit code. */
async function gc(url: string, dataDir: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (d: Buffer) => (out += d.toString()));
  stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await main(['gc', '--nats', url, '--data-dir', dataDir, ...args], { stdout, stderr });
  return { code, stdout: out, stderr: err };
}

describe('actorloop gc', () => {
  const nats = useTestBus();
  let dataDir: string;
  let os: ObjectStore;
  let kept = '';
  const orphans: Record<string, string> = {};

  beforeAll(async () => {
    dataDir = await tempDir('gc');
    // the user's own config must not reach the command
    vi.stubEnv('XDG_CONFIG_HOME', join(dataDir, 'config-home'));
    vi.stubEnv('NATS_URL', '');
    vi.stubEnv('ACTORLOOP_LOG', 'silent');
  });
  afterAll(async () => {
    vi.unstubAllEnvs();
    await rm(dataDir, { recursive: true, force: true });
  });

  const put = async (text: string): Promise<string> => {
    const digest = sha256Digest(text);
    await os.putBlob({ name: digest }, Buffer.from(text));
    return digest;
  };

  it('says there is nothing to remove on a server with no blob bucket', async () => {
    const r = await gc(nats.nats.url, dataDir, '--dry-run');
    expect(r).toMatchObject({ code: EXIT.completed, stderr: '' });
    expect(r.stdout).toBe(`no blob bucket (${BLOB_BUCKET}) on this server: nothing to remove\n`);
  });

  it('keeps every blob younger than the default grace period of an hour', async () => {
    os = await new Objm(nats.bus.js).create(BLOB_BUCKET, { storage: StorageType.File });
    kept = await put('the answer, whole');
    orphans['a'] = await put('a request whose commit never landed');
    orphans['b'] = await put('x'.repeat(3000));
    const actor = newId('agent');
    await createJetStreamLog({ js: nats.bus.logJs, rootId: actor, actorId: actor, position: { seq: 0, streamSeq: 0 }, epoch: 1 }).commit([
      draft('assistant/accepted', { content: 'the answer…', contentRef: { digest: kept, bytes: 17 }, toolCalls: [], finishReason: 'stop' }, { turn: 'turn_1', step: 'step_1' }),
    ]);
    const r = await gc(nats.nats.url, dataDir);
    expect(r).toMatchObject({ code: EXIT.completed, stderr: '' });
    expect(r.stdout).toBe('removed 0 blobs (0 bytes); kept 1 named by the logs (1 commit read) and 2 younger than 1h\n');
    expect((await os.list()).length).toBe(3);
  });

  it('--dry-run lists what it would remove with sizes, and removes nothing', async () => {
    const r = await gc(nats.nats.url, dataDir, '--grace', '0', '--dry-run');
    expect(r).toMatchObject({ code: EXIT.completed, stderr: '' });
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^would remove ${orphans['a']}  35 bytes  written \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d$`)));
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^would remove ${orphans['b']}  2\\.9 KiB  written `)));
    expect(lines[2]).toBe('would remove 2 blobs (3.0 KiB); nothing was removed; kept 1 named by the logs (1 commit read) and 0 younger than 0ms');
    expect((await os.list()).map((o) => o.name).sort()).toEqual([kept, orphans['a'], orphans['b']].sort());
  });

  it('removes what no log names and prints the count and the bytes; --json says the same as one object', async () => {
    const json = await gc(nats.nats.url, dataDir, '--grace', '0', '--dry-run', '--json');
    const report = JSON.parse(json.stdout) as { dryRun: boolean; removed: Array<{ name: string; size: number }>; removedBytes: number; keptNamed: number };
    expect(report).toMatchObject({ dryRun: true, removedBytes: 3035, keptNamed: 1 });
    expect(report.removed.map((o) => o.name).sort()).toEqual([orphans['a'], orphans['b']].sort());

    const r = await gc(nats.nats.url, dataDir, '--grace', '30m');
    expect(r.stdout).toMatch(/^removed 0 blobs .* and 2 younger than 30m\n$/);
    const done = await gc(nats.nats.url, dataDir, '--grace', '0');
    expect(done).toMatchObject({ code: EXIT.completed, stderr: '' });
    expect(done.stdout.split('\n').slice(0, 2).every((l) => l.startsWith('removed sha256:'))).toBe(true);
    expect(done.stdout).toContain('\nremoved 2 blobs (3.0 KiB); kept 1 named by the logs');
    expect((await os.list()).filter((o) => !o.deleted).map((o) => o.name)).toEqual([kept]);
  });

  it('says on stderr when a blob the logs name is not in the bucket', async () => {
    const lost = sha256Digest('gone');
    const actor = newId('agent');
    await createJetStreamLog({ js: nats.bus.logJs, rootId: actor, actorId: actor, position: { seq: 0, streamSeq: 0 }, epoch: 1 }).commit([
      draft('ask/answered', {
        questionId: 'q_1', messageId: 'msg_1', by: 'cli', outcome: 'answered', optionId: null, answer: '[sensitive]', answerRef: { digest: lost, bytes: 4 },
      }, { turn: 'turn_1', step: 'step_1', call: 'call_1' }),
    ]);
    const r = await gc(nats.nats.url, dataDir, '--dry-run');
    expect(r.code).toBe(EXIT.completed);
    expect(r.stderr).toBe(`actorloop: 1 blob the logs name is not in the blob bucket (${lost}): the log alone cannot rebuild it, and an agent that needs one stops with store.blob_missing\n`);
  });

  it('refuses a --grace that is not a duration, in one line', async () => {
    const r = await gc(nats.nats.url, dataDir, '--grace', '5');
    expect(r.code).toBe(EXIT.usage);
    expect(r.stderr).toMatch(/^actorloop: option '--grace <duration>' argument '5' is invalid\. --grace takes a duration such as 90s, 30m, 1h or 2d \(or 0\), got "5"\n$/);
  });

  it('stops in one line, removing nothing, when a commit does not parse', async () => {
    const orphan = await put('an orphan');
    await nats.bus.js.publish(logSubject(newId('agent'), newId('agent')), 'not json');
    const r = await gc(nats.nats.url, dataDir, '--grace', '0');
    expect(r.code).toBe(EXIT.failed);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^actorloop: the commit at stream seq \d+ of LOGS \(log\.agt_\w+\.agt_\w+\) does not parse, so what it names is not known: [^\n]*\n$/);
    expect((await os.list()).map((o) => o.name)).toContain(orphan);
  });
});
