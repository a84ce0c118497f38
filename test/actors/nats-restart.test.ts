import { appendFile, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent, EventType } from '../../src/protocol/events.js';
import type { ToolDefinition } from '../../src/tools/tool.js';
import { startRestartableNats, tempDir, type RestartableNats } from '../helpers/nats.js';
import { openTestRuntime, readLog, turnRequest, type TestRuntime } from '../helpers/runtime.js';
import { message, ofType, startTurn } from './harness.js';

// Design §7 and issue 5: the runtime survives `kill -9` of nats-server and its restart. Clients
// reconnect, commits in flight are retried with the same ID, and while NATS is unreachable no
// intent can be committed, so no effect starts.

let nats: RestartableNats;
let rt: TestRuntime;
const workspaces: string[] = [];

/** Every run of the tool: which line, and when it began. */
const runs: Array<{ line: string; atMs: number }> = [];

/** An effectful tool that appends one line per run to `effects.log`: what ran, and how often. */
const appendTool: ToolDefinition<{ line: string }> = {
  name: 'append',
  version: '1',
  description: 'Append a line to effects.log',
  input: z.strictObject({ line: z.string() }),
  level: 'write',
  executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'manual', on: 'ask' } }),
  resources: (_input, { workspace }) => [{ key: `path:${workspace}/effects.log`, mode: 'write' }],
  async execute(input, ctx) {
    runs.push({ line: input.line, atMs: Date.now() });
    await appendFile(join(ctx.workspace, 'effects.log'), `${input.line}\n`);
    return { ok: true, output: `appended ${input.line}` };
  },
};

// Each model answer takes a while, so a kill lands while one is in flight.
const append = (line: string): ScriptResponse => ({ tool_calls: [{ name: 'append', arguments: { line } }], delay_ms: 300 });
const script: ScriptResponse[] = [append('one'), append('two'), append('three'), { content: 'done', delay_ms: 100 }, { content: 'again' }];

/** How long the server stays down. */
const OUTAGE_MS = 1_500;

beforeAll(async () => {
  nats = await startRestartableNats();
  rt = await openTestRuntime({ natsUrl: nats.url, script, tools: [appendTool] });
});
afterAll(async () => {
  await rt?.close();
  // never leave a server running: the one this file restarted is stopped here
  await nats?.stop();
  for (const ws of workspaces) await rm(ws, { recursive: true, force: true });
});

it.each<[string, EventType, number]>([
  ['a model call is in flight: its tool call arrives while NATS is down and starts only after the restart', 'attempt/start', 2],
  ['a tool has just started: its result and the next step are committed after the restart', 'tool/start', 1],
])('survives kill -9 of nats-server when %s', async (_, killAfter, nth) => {
  const ws = await tempDir('ws');
  workspaces.push(ws);
  runs.length = 0;
  const commits: Array<{ atMs: number; events: ActorEvent[] }> = [];
  let killedAt = Infinity;
  let seen = 0;
  let onKilled!: () => void;
  const killed = new Promise<void>((r) => (onKilled = r));
  const sup = rt.supervisor({
    extra: {
      onCommit: (_id, events) => {
        commits.push({ atMs: Date.now(), events });
        if (events.some((e) => e.type === killAfter) && ++seen === nth) {
          // synchronously, inside the commit callback: the kill lands at this exact point of the run
          killedAt = Date.now();
          void nats.kill().then(onKilled);
        }
      },
    },
  });
  const { actor, ended } = await startTurn(sup, 'append three lines', turnRequest(ws));
  // a client following the log live, as `actorloop follow` does, across the outage
  const following = new AbortController();
  const followed: ActorEvent[] = [];
  const follow = (async () => {
    for await (const s of sup.reader.follow(actor.rootId, actor.actorId, { signal: following.signal })) followed.push(s.event);
  })();
  await killed;
  await new Promise((r) => setTimeout(r, OUTAGE_MS - (Date.now() - killedAt)));
  const restartedAt = Date.now();
  await nats.restart();

  expect(await ended).toMatchObject({ outcome: 'completed', answer: 'done' });
  // the inbox consumer and the wakeup subscription came back too: the next message is taken
  const next = actor.whenTurnEnds();
  await sup.send(message(actor.actorId, 'once more', { request: turnRequest(ws) }));
  expect(await next).toMatchObject({ outcome: 'completed', answer: 'again' });
  const log = await readLog(sup, actor.rootId, actor.actorId);
  const caughtUp = Date.now() + 5_000;
  while (followed.length < log.length && Date.now() < caughtUp) await new Promise((r) => setTimeout(r, 20));
  following.abort();
  await follow;
  expect(followed.map((e) => e.id)).toEqual(log.map((e) => e.id));
  expect(verifyLog(log, { complete: true })).toEqual([]);
  // nothing lost or doubled: gapless seqs, and exactly the events the actor saw acknowledged
  expect(log.map((e) => e.seq)).toEqual(log.map((_e, i) => i + 1));
  expect(log.map((e) => e.id)).toEqual(commits.flatMap((c) => c.events.map((e) => e.id)));

  // every effect once, each after its tool/start was acknowledged
  expect((await readFile(join(ws, 'effects.log'), 'utf8')).split('\n').filter(Boolean)).toEqual(['one', 'two', 'three']);
  expect(runs.map((r) => r.line)).toEqual(['one', 'two', 'three']);
  const starts = ofType(log, 'tool/start');
  expect(starts.map((e) => e.data.input)).toEqual([{ line: 'one' }, { line: 'two' }, { line: 'three' }]);
  const ackedAt = (id: string) => commits.find((c) => c.events.some((e) => e.id === id))!.atMs;
  starts.forEach((s, i) => expect(runs[i]!.atMs).toBeGreaterThanOrEqual(ackedAt(s.id)));

  // while the server was down nothing was committed, so no intent and no effect began
  expect(commits.filter((c) => c.atMs > killedAt && c.atMs < restartedAt)).toEqual([]);
  if (killAfter === 'attempt/start') {
    // the second call was made by the model during the outage and waited for its tool/start
    const call = ofType(log, 'tool/call')[1]!;
    expect(Date.parse(call.at)).toBeGreaterThan(killedAt);
    expect(Date.parse(call.at)).toBeLessThan(restartedAt);
    expect(ackedAt(starts[1]!.id)).toBeGreaterThanOrEqual(restartedAt);
    expect(runs[1]!.atMs).toBeGreaterThanOrEqual(restartedAt);
  }
  // a run during the outage is only one whose tool/start was acknowledged before the kill
  starts.forEach((s, i) => {
    if (ackedAt(s.id) > killedAt) expect(runs[i]!.atMs).toBeGreaterThanOrEqual(restartedAt);
  });
}, 30_000);
