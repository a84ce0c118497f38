import { describe, expect, it } from 'vitest';
import { verifyLog, formatViolations } from '../../src/actors/verify.js';
import { createScriptedModel } from '../../src/model/scripted-model.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { TurnSettings } from '../../src/protocol/events.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, ofType, startTurn, waitForLog } from './harness.js';

const world = actorTestWorld();

const answer = (content: string): ScriptResponse => ({ content, usage: { input_tokens: 50, output_tokens: 5 } });
const call = (name: string, args: Record<string, unknown>): ScriptResponse => ({ tool_calls: [{ name, arguments: args }], usage: { input_tokens: 60, output_tokens: 6 } });

/** Scripted models per agent name: the tree's `main` and its children by the name they were spawned with. */
function tree(scripts: Record<string, ScriptResponse[]>) {
  return async (settings: TurnSettings, cursor: number) => createScriptedModel({ responses: scripts[settings.agentName ?? 'main'] ?? [], cursor });
}

describe('subagents', () => {
  it('a parent spawns two background children, waits for each, and merges what they said', async () => {
    const rt = await world.rts.open({
      modelFor: tree({
        main: [
          { tool_calls: [
            { name: 'spawn_agent', arguments: { task: 'read src/a.txt and say its first line', name: 'reader' } },
            { name: 'spawn_agent', arguments: { task: 'count the lines of src/a.txt', name: 'counter' } },
          ], usage: { input_tokens: 60, output_tokens: 6 } },
          call('wait_agents', {}),
          call('wait_agents', {}),
          call('wait_agents', {}),
          answer('merged: alpha, 2 lines'),
        ],
        reader: [call('read_file', { path: 'src/a.txt' }), answer('the first line is alpha')],
        counter: [call('report', { content: 'halfway there' }), answer('2 lines')],
      }),
    });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'investigate', turnRequest(world.ws));
    const end = await ended;
    expect(end.outcome).toBe('completed');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const requested = ofType(log, 'subagent/spawn_requested');
    expect(requested.map((e) => e.data.name).sort()).toEqual(['counter', 'reader']);
    expect(ofType(log, 'subagent/spawned')).toHaveLength(2);
    // each child's log is its own, under the root's
    for (const r of requested) {
      const child = await waitForLog(sup, { rootId: actor.rootId, actorId: r.data.childId }, (l) => l.some((e) => e.type === 'subagent/notified'));
      const start = ofType(child, 'turn/start')[0]!;
      expect(start.data.source).toBe('subagent_task');
      expect(start.data.settings.agentName).toBe(r.data.name);
      expect(start.data.settings.tools).toContain('report');
      expect(start.data.settings.tools).not.toContain('ask_user_missing');
      const v = verifyLog(child);
      expect(v, formatViolations(v)).toEqual([]);
    }
    if (process.env.DEBUG_TREE) console.log(log.map((e) => `${e.seq} ${e.type} ${JSON.stringify(e.data).slice(0, 160)}`).join('\n'));
    const waited = ofType(log, 'subagent/completed');
    // two notices and a report, each taken by one wait, in the order they came
    expect(waited.map((e) => e.data.kind).sort()).toEqual(['subagent_completed', 'subagent_completed', 'subagent_report']);
    const v = verifyLog(log);
    expect(v, formatViolations(v)).toEqual([]);
  });
});
