import { createScriptedModel } from '../src/model/scripted-model.js';
import type { ScriptResponse } from '../src/model/script.js';
import type { ActorEvent } from '../src/protocol/events.js';
import { newId } from '../src/protocol/ids.js';
import { getGoalTool, updateGoalTool, updatePlanTool } from '../src/tools/builtins/index.js';
import { createToolRegistry } from '../src/tools/registry.js';
import { echoTool } from './echo-tool.js';
import { benchTurnRequest, type BenchRuntime } from './harness.js';
import { fmtMs, nowMs, percentile, table } from './stats.js';

/** One continuation: from the turn's end to the next turn's first prepared request. */
interface ContinuationSample {
  /** The commit holding `turn/end` (goalContinues) → the commit holding the continuation's first `request/prepared` (acks). */
  commitToCommitMs: number;
  /** `turn/end` staged (its `at`, ms resolution) → that `request/prepared` committed. */
  stagedToPreparedMs: number;
  /** The model's final answer of the turn done → that `request/prepared` committed. */
  answerToPreparedMs: number;
  /** Both in one commit. */
  sameCommit: boolean;
}

/**
 * The turns of one agent's goal: in each of `turns − 1` turns the model completes one more plan
 * item (progress: the goal goes on) and answers; in the last it asks to complete the goal and
 * answers, so the goal completes with that turn's end.
 */
function goalScript(turns: number): ScriptResponse[] {
  const out: ScriptResponse[] = [];
  const items = (done: number) => Array.from({ length: turns }, (_, i) => ({ content: `part ${i + 1}`, status: i < done ? 'completed' : 'pending' }));
  for (let t = 1; t < turns; t++) {
    out.push({ tool_calls: [{ name: 'update_plan', arguments: { items: items(t) } }] }, { content: `part ${t} done` });
  }
  out.push({ tool_calls: [{ name: 'update_goal', arguments: { phase: 'complete', reason: 'all parts done', expected_revision: 0 } }] }, { content: 'all done' });
  return out;
}

/** Runs `agents` goals of `turns` turns, one agent at a time, and returns a sample per continuation. */
async function sampleContinuations(rt: BenchRuntime, agents: number, turns: number): Promise<{ samples: ContinuationSample[]; incomplete: number }> {
  const script = goalScript(turns);
  const commits = new Map<string, Array<{ at: number; events: ActorEvent[] }>>();
  const doneAt = new Map<string, number[]>();
  let current = '';
  const sup = rt.supervisor({
    tools: createToolRegistry([echoTool, updatePlanTool, getGoalTool, updateGoalTool]),
    modelFor: async (_settings, cursor) => {
      const inner = createScriptedModel({ responses: script, cursor, record: false });
      const id = current;
      return {
        ...inner,
        async *stream(prepared, signal) {
          for await (const ev of inner.stream(prepared, signal)) {
            if (ev.type === 'done') (doneAt.get(id) ?? doneAt.set(id, []).get(id)!).push(nowMs());
            yield ev;
          }
        },
      };
    },
    onCommit(actorId, events) {
      (commits.get(actorId) ?? commits.set(actorId, []).get(actorId)!).push({ at: nowMs(), events });
    },
  });
  const samples: ContinuationSample[] = [];
  let incomplete = 0;
  try {
    for (let i = 0; i < agents; i++) {
      const actorId = newId('agent');
      current = actorId;
      const actor = await sup.create({ actorId, kind: 'agent', parentId: null, rootId: actorId, title: 'goal bench', workspace: rt.workspace, labels: {} });
      const request = { ...benchTurnRequest(rt.workspace, 10), tools: ['update_plan', 'get_goal', 'update_goal'], goal: { objective: 'all parts done', budget: {}, maxIdleTurns: 2 } };
      await sup.send({
        id: newId('message'), from: 'client:bench', to: actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
        content: 'do all parts', request, sentAt: new Date().toISOString(),
      });
      // the goal is over once its completion is committed and the actor has nothing left to do
      for (let waited = 0; actor.projection.goal?.phase !== 'complete' && waited < 30_000; waited += 5) await new Promise((r) => setTimeout(r, 5));
      await actor.idle();
      if (actor.projection.goal?.phase !== 'complete') incomplete += 1;
      samples.push(...continuationsOf(commits.get(actorId) ?? [], doneAt.get(actorId) ?? []));
    }
  } finally {
    await sup.stop();
  }
  return { samples, incomplete };
}

/** The continuations of one agent's commits: each turn/end that said so, to the next turn's first request/prepared. */
function continuationsOf(commits: Array<{ at: number; events: ActorEvent[] }>, doneAt: number[]): ContinuationSample[] {
  const out: ContinuationSample[] = [];
  // each turn but the last ends after its second model answer: answers 2, 4, ... end the turns
  let turnIndex = 0;
  let pending: { at: number; stagedAt: number; commit: number; answerAt: number } | null = null;
  commits.forEach((c, ci) => {
    for (const e of c.events) {
      if (e.type === 'turn/end') {
        turnIndex += 1;
        if (e.data.goalContinues === true) {
          pending = { at: c.at, stagedAt: Date.parse(e.at) - performance.timeOrigin, commit: ci, answerAt: doneAt[turnIndex * 2 - 1] ?? Number.NaN };
        }
      } else if (e.type === 'request/prepared' && pending !== null) {
        const p: { at: number; stagedAt: number; commit: number; answerAt: number } = pending;
        out.push({ commitToCommitMs: c.at - p.at, stagedToPreparedMs: c.at - p.stagedAt, answerToPreparedMs: c.at - p.answerAt, sameCommit: ci === p.commit });
        pending = null;
      }
    }
  });
  return out;
}

const stats = (xs: number[]) => [fmtMs(percentile(xs, 50)), fmtMs(percentile(xs, 90)), fmtMs(Math.max(...xs))];

/**
 * The goal continuation (issue 17): a turn ends with its goal active and progress made, and the
 * scheduler claims the next turn; timed from the turn's end to the continuation's first prepared
 * request. Prints a table; never asserts.
 */
export async function runGoalContinuation(rt: BenchRuntime, opts: { agents: number; turns: number }): Promise<void> {
  await sampleContinuations(rt, 3, opts.turns); // warm-up, not reported
  const { samples: s, incomplete } = await sampleContinuations(rt, opts.agents, opts.turns);
  console.log('');
  console.log(`== goal continuation (${opts.agents} goals of ${opts.turns} turns, one agent at a time; ${s.length} continuations) ==`);
  console.log(table(
    ['figure', 'p50 ms', 'p90 ms', 'max ms'],
    [
      ["model's last answer done → continuation request/prepared committed", ...stats(s.map((x) => x.answerToPreparedMs))],
      ['turn/end staged (±1 ms) → continuation request/prepared committed', ...stats(s.map((x) => x.stagedToPreparedMs))],
      ['turn/end commit → continuation request/prepared commit', ...stats(s.map((x) => x.commitToCommitMs))],
    ],
  ));
  const same = s.filter((x) => x.sameCommit).length;
  console.log(
    `notes: the turn's end, the goal's continuation (turn/start goal_continuation + its user/message) and the first request\n` +
      `  were one commit in ${same} of ${s.length} continuations. The first row starts before the turn's end (the answer is\n` +
      `  accepted, the turn settles, then it ends): an upper bound on turn end → prepared request, on the host's performance clock.\n` +
      `  "staged" is turn/end's own \`at\` (the wall clock's ms) on that clock, so its row is ±1 ms. Goals not completed: ${incomplete}.`,
  );
  const p50 = percentile(s.map((x) => x.answerToPreparedMs), 50);
  console.log(`target (issue): p50 ≤ 10 ms [${fmtMs(p50)} ms: ${p50 <= 10 ? 'met' : 'MISSED'}]`);
}
