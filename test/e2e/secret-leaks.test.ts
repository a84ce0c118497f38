// Secrets a person gives an agent, through the real CLI and a real nats-server: a token pasted
// into a task (or a message sent after it) is redacted before the log holds it, so `runs`,
// `events` and the LOGS stream's bytes show `[REDACTED:…]`; the INBOX stream keeps neither it nor
// a sensitive answer once its receipt is committed, and the server's file store is overwritten
// where they were. A sensitive answer still reaches the model, from the data dir's blob store.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { describe, test, type ExpectStatic } from 'vitest';
import { BLOB_STREAM } from '../../src/bus/subjects.js';
import { createLmdbBlobStore } from '../../src/store/blob-port.js';
import { openLmdbStore } from '../../src/store/lmdb-store.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { lines, parseEvents, show, type CliResult } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const stack = useCliStack();

// tokens the redactor recognises (a GitHub token, an OpenAI key), made up for this test
const TASK_SECRET = 'ghp_T3stT0kenAbCdEfGhIjKlMnOpQrStUvWx1234';
const SENT_SECRET = 'sk-proj-T3stKeyAbCdEfGhIjKlMnOp5678';

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

async function setup(onTestFinished: (fn: () => Promise<void>) => void, responses: unknown[]) {
  const ws = await stack.workspace();
  const dataDir = await stack.dir('leaks');
  const script = join(dataDir, 'script.json');
  await writeFile(script, JSON.stringify({ responses }));
  const cli = stack.cli(onTestFinished, dataDir);
  const common = stack.flags(dataDir);
  return { ws, dataDir, cli, common, model: `scripted:${script}` };
}

/** Every message a stream holds now, as text (deleted sequences are skipped). */
async function streamTexts(stream: string): Promise<string[]> {
  const nc = await connect({ servers: stack.nats.url });
  try {
    const jsm: JetStreamManager = await jetstreamManager(nc);
    const { state } = await jsm.streams.info(stream);
    const out: string[] = [];
    for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
      const m = await jsm.streams.getMessage(stream, { seq }).catch(() => null);
      if (m) out.push(`${m.subject} ${new TextDecoder().decode(m.data)}`);
    }
    return out;
  } finally {
    await nc.close();
  }
}

/** Files under `dir` whose bytes contain `needle`. */
async function filesHolding(dir: string, needle: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    const bytes = await readFile(path).catch(() => null);
    if (bytes?.includes(needle)) found.push(path);
  }
  return found;
}

describe('a secret in a task', () => {
  test('is redacted in runs, events and the log\'s bytes, and erased from the inbox stream', async ({ expect, onTestFinished }) => {
    const { ws, cli, common, model } = await setup(onTestFinished, [{ content: 'first done' }, { content: 'second done' }]);
    const run = await cli.run(['run', `deploy with ${TASK_SECRET} please`, '--model', model, '--cwd', ws, ...common]);
    expectExit(expect, run, 0);
    const agentId = lines(run.stdout)[0]!;
    const sent = await cli.run(['send', agentId, `and then use OPENAI_API_KEY=${SENT_SECRET}`, ...common]);
    expectExit(expect, sent, 0);

    const runs = await cli.run(['runs', ...common]);
    const runsJson = await cli.run(['runs', '--json', ...common]);
    const events = await cli.run(['events', agentId, '--json', ...common]);
    const human = await cli.run(['events', agentId, ...common]);
    const tree = await cli.run(['tree', agentId, ...common]);
    expectExit(expect, tree, 0);
    for (const r of [run, sent, runs, runsJson, events, human, tree]) {
      expect(r.stdout + r.stderr).not.toContain(TASK_SECRET);
      expect(r.stdout + r.stderr).not.toContain(SENT_SECRET);
    }
    // LAST TASK is the second turn's: the message sent, redacted
    expect(runs.stdout).toContain('and then use OPENAI_API_KEY=[REDACTED:');
    const log = parseEvents(events.stdout);
    expect(log.filter((e) => e.type === 'user/message').map((e) => e.type === 'user/message' && e.data.content)).toEqual([
      'deploy with [REDACTED:github_token] please',
      'and then use OPENAI_API_KEY=[REDACTED:openai_key]',
    ]);
    expect(log.filter((e) => e.type === 'inbox/received').map((e) => e.type === 'inbox/received' && e.data.redactions)).toEqual([1, 1]);

    const logs = await streamTexts('LOGS');
    expect(logs.some((t) => t.includes('[REDACTED:github_token]'))).toBe(true);
    // both messages held a secret: the inbox stream keeps neither
    const inbox = await streamTexts('INBOX');
    for (const secret of [TASK_SECRET, SENT_SECRET]) {
      expect(logs.filter((t) => t.includes(secret))).toEqual([]);
      expect(inbox.filter((t) => t.includes(secret))).toEqual([]);
    }
    // nor anywhere in the server's files: the erase overwrote the inbox messages' bytes
    for (const secret of [TASK_SECRET, SENT_SECRET]) expect(await filesHolding(stack.nats.storeDir, secret)).toEqual([]);
  });
});

describe('a sensitive answer', () => {
  test('reaches the model, and neither the inbox stream, the log nor the server\'s files outside the blob bucket hold it', async ({ expect, onTestFinished }) => {
    const secret = 'tok-SECRET-9191-hunter';
    const ask = { name: 'ask_user', arguments: { question: 'The deploy token?', sensitive: true } };
    const { ws, dataDir, cli, common, model } = await setup(onTestFinished, [
      { tool_calls: [ask] }, { tool_calls: [{ name: 'list_dir', arguments: {} }] }, { content: 'deployed' },
    ]);
    const first = await cli.run(['run', 'deploy it', '--model', model, '--cwd', ws, ...common]);
    expectExit(expect, first, 5);
    const agentId = lines(first.stdout)[0]!;
    const qid = /waiting for an answer to question (q_\w+)/.exec(first.stderr)![1]!;
    const answered = await cli.run(['answer', agentId, qid, secret, ...common]);
    expectExit(expect, answered, 0);

    const inbox = await streamTexts('INBOX');
    expect(inbox.some((t) => t.includes('deploy it')), 'the task is still in the inbox stream').toBe(true);
    expect(inbox.filter((t) => t.includes(secret))).toEqual([]);
    expect((await streamTexts('LOGS')).filter((t) => t.includes(secret))).toEqual([]);
    // the server's files hold it only in the blob bucket (the answer's salted payload and the
    // requests that carry it), which only the host login may read
    const holding = await filesHolding(stack.nats.storeDir, secret);
    expect(holding.filter((path) => !path.includes(`/streams/${BLOB_STREAM}/`))).toEqual([]);

    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    const result = log.find((e) => e.type === 'tool/result' && e.data.source === 'person');
    const outputRef = result?.type === 'tool/result' ? result.data.outputRef : undefined;
    expect(outputRef?.digest).toMatch(/^sha256:/);
    const lmdb = openLmdbStore(dataDir);
    try {
      const blobs = createLmdbBlobStore(lmdb);
      // the model's next request holds the answer: read from the data dir's blob store
      const prepared = log.filter((e) => e.type === 'request/prepared').at(-1);
      expect(await blobs.getText(prepared?.type === 'request/prepared' ? prepared.data.digest : '')).toContain(secret);
      // the observation's blob is salted: its digest in the log is not the digest of any text a
      // reader of the log could guess and hash
      const observation = (await blobs.getText(outputRef!.digest))!;
      expect(observation).toContain(secret);
      const seen = 'The person answered: tok-SECRET-9191-hunter\n(This answer is sensitive: use it where it is needed, and do not repeat it in your answer or in files.)';
      expect(outputRef!.digest).not.toBe(sha256Digest(seen));
    } finally {
      await lmdb.close();
    }
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });
});
