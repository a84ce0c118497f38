// A sweep of crashes: the demo scenario is dropped at every fault point, at every occurrence the
// scenario reaches, and at two points in a row (a crash during the recovery of a crash); each time
// a new incarnation finishes the turn, the log verifies, the projection equals a full replay, and
// the effectful write ran at most once per started call.
import { cp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import type { TurnEnded } from '../../src/actors/actor/hosted-agent.js';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import { loadScript } from '../../src/model/script.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { tempDir } from '../helpers/nats.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, ofType, replay, startTurn } from './harness.js';

const DEMO = join(import.meta.dirname, '..', '..', 'examples', 'demo');
let script: ScriptResponse[];
let fixed: string;
const dirs: string[] = [];

const world = actorTestWorld();
const { rts } = world;
beforeAll(async () => {
  script = await loadScript(join(DEMO, 'script.json'));
  fixed = (script[3]!.tool_calls![0]!.arguments as { content: string }).content;
});
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

// How often the demo reaches each point: 6 steps, 6 tool calls, 6 model streams.
const CASES: Array<[string, number]> = [
  ['after:turn/start', 1],
  ['after:step/start', 6],
  ['mid:model-stream', 5],
  // the 6th is in the commit that also ends the turn: a drop after it finds the turn completed
  ['after:assistant/accepted', 5],
  ['after:tool/start', 6],
  ['before:tool/result', 6],
];

async function workspace(): Promise<string> {
  const ws = await tempDir('chaos-ws');
  dirs.push(ws);
  await cp(join(DEMO, 'workspace'), ws, { recursive: true });
  return ws;
}

/** Drops the agent at each spec in turn (each on a new incarnation), then finishes the turn. */
async function crashAndFinish(specs: string[]): Promise<void> {
  const rt = await rts.open({ script });
  const ws = await workspace();
  const first = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs(specs[0]!)) });
  const { actor, ended } = await startTurn(first, 'fix the failing test', turnRequest(ws));
  await expect(ended).rejects.toMatchObject({ code: 'actor.dropped' });
  let last: AgentActor = actor;
  for (const spec of [...specs.slice(1), null]) {
    const sup = rt.supervisor(spec ? { faults: createFaultInjector(parseFaultSpecs(spec)) } : {});
    let done!: Promise<TurnEnded>;
    const { actor: next } = await sup.hydrate(actor.actorId, (a) => {
      done = a.whenTurnEnds();
      done.catch(() => {});
    });
    last = next;
    if (spec) await expect(done).rejects.toMatchObject({ code: 'actor.dropped' });
    else await expect(done).resolves.toMatchObject({ outcome: 'completed' });
  }
  const log = await readLog(rt.supervisor(), actor.rootId, actor.actorId);
  const violations = verifyLog(log, { complete: true });
  expect(violations, formatViolations(violations)).toEqual([]);
  expect(replay(actor.actorId, log)).toEqual(last.projection);
  // one recovery per crash, each closed
  // one committed recovery per incarnation that got as far as committing (a drop during
  // recovery commits nothing of it)
  const committedRecoveries = specs.filter((s) => !s.startsWith('during:recovery')).length;
  expect(ofType(log, 'recovery/continuation')).toHaveLength(committedRecoveries);
  // the effectful write: started once, or again (same key, marked rerun) only right after its
  // tool reconciled it as not applied; the file holds the fix unless the outcome is unknown
  const writes = ofType(log, 'tool/start').filter((e) => e.data.name === 'write_file');
  const notApplied = ofType(log, 'tool/reconciled').filter((e) => e.call === writes[0]?.call && e.data.verdict === 'not_applied');
  expect(writes).toHaveLength(1 + notApplied.length);
  for (const again of writes.slice(1)) expect(again.data).toMatchObject({ rerun: true, idempotencyKey: writes[0]!.data.idempotencyKey });
  const content = await readFile(join(ws, 'src', 'slug.js'), 'utf8');
  const unknown = ofType(log, 'tool/outcome_unknown');
  if (unknown.length === 0) expect(content).toBe(fixed);
  else expect([fixed, content]).toContain(content);
  // every drop is noted by the incarnation that recovered from it
  expect(ofType(log, 'actor/killed').length).toBeGreaterThanOrEqual(committedRecoveries);
}

describe('chaos sweep in process', () => {
  for (const [point, times] of CASES) {
    for (let n = 1; n <= times; n++) {
      it(`drop at ${point}@${n}`, async () => crashAndFinish([`${point}@${n}=drop`]));
    }
  }
  it('drop during the recovery of a drop', async () => crashAndFinish(['after:tool/start@2=drop', 'during:recovery=drop']));
  it('drop twice in a row at different points', async () =>
    crashAndFinish(['mid:model-stream@2=drop', 'after:tool/start@1=drop']));
});
