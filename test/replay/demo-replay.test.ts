import { cp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_TASK } from '../../src/cli/commands/demo.js';
import { MachineSet } from '../../src/actors/actor/machine-set.js';
import { createScriptedModel } from '../../src/model/scripted-model.js';
import { loadScript, type ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { PROJECTION_VERSION, type Projection } from '../../src/store/projection.js';
import { SnapshotSchema } from '../../src/store/snapshots.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { openTestRuntime, readLog, runTurn, turnRequest } from '../helpers/runtime.js';

// Regenerate with: UPDATE_FIXTURES=1 npx vitest run test/replay
const UPDATE = process.env.UPDATE_FIXTURES === '1';
const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'demo');
const SCRIPT = join(import.meta.dirname, '..', '..', 'examples', 'demo', 'script.json');
const WORKSPACE = join(import.meta.dirname, '..', '..', 'examples', 'demo', 'workspace');

/** What a replay compares: the event types in order and every prepared request, byte for byte. */
interface Recording {
  types: string[];
  requests: string[];
  snapshot: unknown;
}

let nats: TestNats;
beforeAll(async () => {
  nats = await startTestNats();
});
afterAll(async () => nats.stop());

/** Runs the demo scenario in-process from a script and records what the replay compares. */
async function record(responses: ScriptResponse[]): Promise<Recording> {
  const ws = await tempDir('demo-ws');
  await cp(WORKSPACE, ws, { recursive: true });
  const rt = await openTestRuntime({
    natsUrl: nats.url,
    modelFor: async (_s, cursor) => createScriptedModel({ responses, cursor, source: 'demo' }),
  });
  try {
    const sup = rt.supervisor({ snapshotEvery: 16 });
    // The model spec is a stable string: absolute paths would make the fixture machine-specific.
    const { actor, ended } = await runTurn(sup, DEMO_TASK, turnRequest(ws, { model: 'scripted:examples/demo/script.json' }));
    expect(ended.outcome).toBe('completed');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const requests: string[] = [];
    for (const e of log) {
      if (e.type !== 'request/prepared') continue;
      const body = await rt.blobs.getText(e.data.digest);
      if (body === undefined) throw new Error(`blob ${e.data.digest} is missing`);
      requests.push(body);
    }
    const snapshot = await rt.snapshots.load(actor.actorId);
    return { types: log.map((e: ActorEvent) => e.type), requests, snapshot };
  } finally {
    await rt.close();
    await rm(ws, { recursive: true, force: true });
  }
}

/** The first difference between a recording and the fixture, or null when they match. */
function firstDifference(got: Recording, want: { types: string[]; requests: string[] }): string | null {
  const n = Math.max(got.types.length, want.types.length);
  for (let i = 0; i < n; i++) {
    if (got.types[i] !== want.types[i]) return `event ${i + 1}: got ${got.types[i]}, recorded ${want.types[i]}`;
  }
  const m = Math.max(got.requests.length, want.requests.length);
  for (let i = 0; i < m; i++) {
    if (got.requests[i] !== want.requests[i]) return `prepared request ${i + 1} differs from the recorded one`;
  }
  return null;
}

async function loadFixture(): Promise<{ types: string[]; requests: string[] }> {
  const types = JSON.parse(await readFile(join(FIXTURES, 'event-types.json'), 'utf8')) as string[];
  const requests = (await readFile(join(FIXTURES, 'requests.ndjson'), 'utf8')).split('\n').filter(Boolean);
  return { types, requests };
}

describe('demo replay', () => {
  it('reproduces the recorded event types and prepared requests from the fixed script', async () => {
    const got = await record(await loadScript(SCRIPT));
    if (UPDATE) {
      await writeFile(join(FIXTURES, 'event-types.json'), `${JSON.stringify(got.types, null, 1)}\n`);
      await writeFile(join(FIXTURES, 'requests.ndjson'), `${got.requests.join('\n')}\n`);
      await writeFile(join(FIXTURES, 'snapshot-v1.json'), `${JSON.stringify(got.snapshot, null, 1)}\n`);
    }
    const want = await loadFixture();
    expect(want.requests).toHaveLength(6);
    expect(firstDifference(got, want)).toBeNull();
  });

  it('fails the comparison when the script changes', async () => {
    const responses = await loadScript(SCRIPT);
    // The model searches for something else: the observation, and so the next request, change.
    const altered = structuredClone(responses);
    altered[2]!.tool_calls![0]!.arguments = { pattern: 'toLowerCase', path: 'src' };
    const got = await record(altered);
    expect(firstDifference(got, await loadFixture())).toBe('prepared request 4 differs from the recorded one');
  });

  it('still loads the recorded v1 snapshot: projection and machine states', async () => {
    const raw = JSON.parse(await readFile(join(FIXTURES, 'snapshot-v1.json'), 'utf8'));
    const snap = SnapshotSchema.parse(raw);
    expect(snap.schemaVersion).toBe(PROJECTION_VERSION);
    const projection = snap.projection as Projection;
    expect(projection.version).toBe(1);
    expect(projection.history.length).toBeGreaterThan(0);
    const machines = new MachineSet(snap.actorId, () => {}, snap.machines as never);
    const states = machines.states();
    machines.stop();
    expect(states.agent).toBeTruthy();
    // a snapshot taken mid-turn restores an open turn; at the end of the turn, an idle agent
    expect(projection.openTurn ? states.turn : states.agent).toBeTruthy();
  });
});
