import { execFile } from 'node:child_process';
import { cp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultTooling } from '../../src/actors/agent/tooling.js';
import { treeOk, verifyTree } from '../../src/verify/tree.js';
import { demoScenarioOf, INVESTIGATORS_TASK, investigatorsDir, treeLine } from '../../src/cli/commands/demo.js';
import { loadScript, loadScriptFile } from '../../src/model/script.js';
import { createScriptedModel } from '../../src/model/scripted-model.js';
import { ConfigError } from '../../src/protocol/errors.js';
import type { ActorEvent, TurnSettings } from '../../src/protocol/events.js';
import { findBubblewrap } from '../../src/tools/sandbox.js';
import { tempDir } from '../helpers/nats.js';
import { turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, ofType, startTurn } from '../actors/harness.js';

const world = actorTestWorld();
const script = join(investigatorsDir(), 'script.json');
const dirs: string[] = [];
afterAll(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

/** What one run of the demo's tree did, agent by agent: the tools of each step and the answer. */
interface TreeRun {
  steps: Record<string, string[][]>;
  answers: Record<string, string | null>;
  logs: Map<string, ActorEvent[]>;
  rootId: string;
  workspace: string;
}

/** Runs the demo's script on a fresh copy of its workspace, in-process, as `demo investigators` does (full-auto, bubblewrap). */
async function runDemoTree(): Promise<TreeRun> {
  const workspace = await tempDir('investigators');
  dirs.push(workspace);
  await cp(join(investigatorsDir(), 'workspace'), workspace, { recursive: true });
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp' };
  const bwrapPath = await findBubblewrap(env.PATH);
  expect(bwrapPath, 'bubblewrap must work here (.ci/run installs it)').not.toBeNull();
  const rt = await world.rts.open({
    modelFor: async (settings: TurnSettings, cursor: number) => createScriptedModel({ responses: await loadScript(script, settings.agentName ?? 'main'), cursor }),
  });
  const sup = rt.supervisor({ extra: { tooling: defaultTooling({ bwrapPath, env }) } });
  const { actor, ended } = await startTurn(sup, INVESTIGATORS_TASK, turnRequest(workspace, { approvalMode: 'full-auto' }));
  const end = await ended;
  expect(end.outcome, end.reason ?? '').toBe('completed');
  let logs = new Map<string, ActorEvent[]>();
  // the children's notices are committed as sent after their turns end: read once the tree settled
  for (let i = 0; i < 200; i++) {
    logs = new Map();
    for await (const { actorId, event } of sup.reader.readTree(actor.rootId)) logs.set(actorId, [...(logs.get(actorId) ?? []), event]);
    if (logs.size === 4 && verifyTree(logs, actor.rootId).running.length === 0) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  const names = new Map([[actor.rootId, 'main']]);
  for (const r of ofType(logs.get(actor.rootId)!, 'subagent/spawn_requested')) names.set(r.data.childId, r.data.name);
  const steps: TreeRun['steps'] = {};
  const answers: TreeRun['answers'] = {};
  for (const [id, log] of logs) {
    const name = names.get(id) ?? id;
    steps[name] = ofType(log, 'assistant/accepted').map((a) => a.data.toolCalls.map((c) => c.name));
    answers[name] = ofType(log, 'turn/end').at(-1)?.data.answer ?? null;
  }
  return { steps, answers, logs, rootId: actor.rootId, workspace };
}

describe('demo investigators', () => {
  it('replays its scripted tree the same way every time: three investigators in one step, each reporting, the fix verified', async () => {
    const first = await runDemoTree();
    const second = await runDemoTree();
    expect(second.steps).toEqual(first.steps);
    expect(second.answers).toEqual(first.answers);
    const fixed = async (run: TreeRun) => readFile(join(run.workspace, 'src', 'total.js'), 'utf8');
    expect(await fixed(second)).toBe(await fixed(first));
    expect(await fixed(first)).toContain('discount / 100');
    // every agent of the script played every response it has, and no other agent ran
    const file = await loadScriptFile(script);
    const agents = 'agents' in file ? file.agents : {};
    expect(Object.keys(first.steps).sort()).toEqual(Object.keys(agents).sort());
    for (const [name, a] of Object.entries(agents)) expect(first.steps[name], name).toHaveLength(a.responses.length);
    for (const run of [first, second]) {
      const root = run.logs.get(run.rootId)!;
      const spawns = ofType(root, 'subagent/spawn_requested');
      expect(spawns.map((s) => s.data.name).sort()).toEqual(['change-reader', 'failure-reader', 'reproducer']);
      expect(new Set(spawns.map((s) => s.step)).size).toBe(1);
      for (const s of spawns) expect(ofType(run.logs.get(s.data.childId)!, 'subagent/reported'), s.data.name).toHaveLength(1);
      const v = verifyTree(run.logs, run.rootId);
      expect(treeOk(v), JSON.stringify(v.tree.concat(v.actors.flatMap((a) => a.violations.map((x) => ({ ...x, actorId: a.actorId })))))).toBe(true);
      // the fix holds: the workspace's tests pass
      await promisify(execFile)(process.execPath, ['--test'], { cwd: run.workspace });
    }
  });

  it('prints a line when a child is spawned, reports and ends, and nothing for the rest', () => {
    const names = new Map([['agt_root', 'main']]);
    const reports = new Map<string, string>();
    const base = { v: 1, id: 'e', at: '2026-01-01T00:00:00.000Z', epoch: 1, seq: 1, actor: 'agt_x' };
    const lines = ([
      ['agt_root', { ...base, type: 'subagent/spawn_requested', data: { childId: 'agt_c', name: 'reproducer' } }],
      ['agt_root', { ...base, type: 'subagent/spawned', data: { requestId: 'r', childId: 'agt_c', messageId: 'r' } }],
      ['agt_c', { ...base, type: 'tool/start', call: 'call_1', data: { name: 'report', input: { content: 'it fails\nwith -90' } } }],
      ['agt_c', { ...base, type: 'subagent/reported', call: 'call_1', data: { parentId: 'agt_root', messageId: 'm' } }],
      ['agt_c', { ...base, type: 'turn/end', data: { outcome: 'completed', answer: 'reproduced \u001b[31m', noticeOwed: true } }],
      ['agt_root', { ...base, type: 'turn/end', data: { outcome: 'completed', answer: 'fixed' } }],
    ] as Array<[string, unknown]>).map(([id, e]) => treeLine(id, e as ActorEvent, names, reports)).filter((l) => l !== null);
    expect(lines).toEqual([
      'tree: main spawned reproducer (agt_c)',
      'tree: reproducer reports: it fails',
      expect.stringMatching(/^tree: reproducer ended its turn: completed — reproduced (?!\u001b)/),
    ]);
  });

  it('names the scenarios it has when given one it does not', () => {
    expect(demoScenarioOf('investigators')).toBe('investigators');
    expect(() => demoScenarioOf('investigator')).toThrow(ConfigError);
  });
});
