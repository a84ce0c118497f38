// The chaos session's modes: which points need a person's act, the script variant each runs,
// and how often a clean run of it reaches its point. No
// processes: the e2e test (test/e2e/cli-chaos.test.ts) drives them through the CLI.
import { describe, expect, test } from 'vitest';
import { pendingQuestions } from '../../src/cli/chaos/child.js';
import { CHAOS_MAX_TOKENS, INTERRUPT_DELAY_MS, MODES, QUESTION_OPTION, modeFor, responsesFor, runsScriptAsIs, scriptFor } from '../../src/cli/chaos/modes.js';
import { CHAOS_POINTS, occurrences, planRuns } from '../../src/cli/chaos/plan.js';
import { ScriptSchema, type ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent } from '../../src/protocol/events.js';

// only the fields the functions read are filled in: they are handed logs the schema already checked
const events = (...es: Array<Record<string, unknown>>): ActorEvent[] => es as unknown as ActorEvent[];

const responses: ScriptResponse[] = [
  { content: 'look', tool_calls: [{ name: 'list_dir', arguments: { path: '.' } }] },
  { content: 'done' },
];

describe('modes', () => {
  test('only the points that need a person to act (or a budget) leave full-auto, each in a mode of its own', () => {
    const modes = Object.fromEntries(CHAOS_POINTS.filter((p) => modeFor(p) !== 'full-auto').map((p) => [p, modeFor(p)]));
    expect(modes).toEqual({
      'after:inbox-reserved': 'steer',
      'after:interrupt/requested': 'interrupt',
      'after:ask/asked': 'question',
      'after:budget-reserved': 'budget',
      'after:approval/granted': 'ask',
      'after:goal/updated': 'goal',
      'after:compaction/started': 'compact',
      'before:checkpoint/committed': 'compact',
      'after:job/started': 'job',
      'before:job/notified': 'job',
      'after:node/ended': 'workflow',
    });
    // a workflow run writes a two-node workflow, starts it and waits for it, then runs the scenario
    expect(responsesFor('workflow', responses).slice(0, 3).map((r) => r.tool_calls![0]!.name)).toEqual(['write_file', 'start_workflow', 'wait_jobs']);
    // a job run starts a job and waits for it, then runs the scenario as it is
    const job = responsesFor('job', responses);
    expect(job.slice(2)).toEqual(responses);
    expect(job.slice(0, 2).map((r) => r.tool_calls![0]!.name)).toEqual(['start_job', 'wait_jobs']);
    // a compact run is the scenario as it is, asked for a checkpoint at its first approval wait
    expect(MODES.compact).toMatchObject({ approve: 'ask', outcome: 'completed', runArgs: ['-c', 'compaction_keep_steps=1', '-c', 'compaction_min_gain_tokens=0'] });
    expect(responsesFor('compact', responses)).toEqual(responses);
    // a budget run is the scenario as it is, with a token budget no attempt comes near
    expect(MODES.budget).toMatchObject({ approve: 'full-auto', outcome: 'completed', runArgs: ['--max-tokens', String(CHAOS_MAX_TOKENS)] });
    expect(responsesFor('budget', responses)).toEqual(responses);
    expect(planRuns(['after:inbox-reserved', 'after:interrupt/requested', 'after:ask/asked'], 1, null, () => 1).map((p) => p.mode)).toEqual(['steer', 'interrupt', 'question']);
  });

  test('an interrupt run ends cancelled; every other mode completes; a steer is sent at an approval wait', () => {
    expect(Object.entries(MODES).filter(([, m]) => m.outcome !== 'completed').map(([k]) => k)).toEqual(['interrupt']);
    expect(MODES.steer.approve).toBe('ask');
    expect(MODES.interrupt.approve).toBe('full-auto');
  });

  test('interrupt: the first response waits (abortably) for the interrupt; nothing else changes', () => {
    const out = responsesFor('interrupt', responses);
    expect(out[0]).toEqual({ ...responses[0], delay_ms: INTERRUPT_DELAY_MS });
    expect(out.slice(1)).toEqual(responses.slice(1));
    // a longer delay the scenario chose is kept
    expect(responsesFor('interrupt', [{ content: 'x', delay_ms: INTERRUPT_DELAY_MS + 1 }])[0]!.delay_ms).toBe(INTERRUPT_DELAY_MS + 1);
  });

  test('steer: the script as it is, and a spare final answer for the step a given-back steer may need', () => {
    const out = responsesFor('steer', responses);
    expect(out.slice(0, -1)).toEqual(responses);
    expect(out.at(-1)).toMatchObject({ content: expect.any(String) });
    expect(out.at(-1)!.tool_calls).toBeUndefined();
  });

  test('goal: the run has a goal, and the script asks to complete it just before its final answer', () => {
    expect(MODES.goal).toMatchObject({ goal: true, outcome: 'completed' });
    const out = responsesFor('goal', responses);
    expect(out).toHaveLength(responses.length + 1);
    expect(out.at(-1)).toEqual(responses.at(-1));
    expect(out.at(-2)!.tool_calls![0]).toMatchObject({ name: 'update_goal', arguments: { phase: 'complete', expected_revision: 0 } });
  });

  test('question: an ask_user call the driver can answer with its option comes first', () => {
    const out = responsesFor('question', responses);
    expect(out.slice(1)).toEqual(responses);
    const call = out[0]!.tool_calls![0]!;
    expect(call.name).toBe('ask_user');
    expect((call.arguments as { options: Array<{ id: string }> }).options.map((o) => o.id)).toEqual([QUESTION_OPTION]);
  });

  test('a variant is a valid script, and a script of several agents keeps the others as they are', () => {
    const agents = { agents: { main: { responses }, helper: { responses: [{ content: 'hi' }] } } };
    for (const mode of Object.keys(MODES) as Array<keyof typeof MODES>) {
      expect(ScriptSchema.safeParse(scriptFor(mode, { responses })).success).toBe(true);
      const v = scriptFor(mode, agents);
      expect(v).toMatchObject({ agents: { helper: agents.agents.helper } });
      if (runsScriptAsIs(mode)) expect(scriptFor(mode, { responses })).toEqual({ responses });
    }
  });
});

describe('occurrences of the new points in a clean run', () => {
  const log = events(
    { type: 'step/start', data: {} },
    { type: 'inbox/received', data: { messageId: 'msg_a', kind: 'steer' } },
    { type: 'step/start', data: { messageIds: ['msg_a'] } },
    { type: 'ask/asked', data: { questionId: 'q_1' } },
    { type: 'ask/answered', data: { questionId: 'q_1' } },
    { type: 'ask/asked', data: { questionId: 'q_2' } },
    { type: 'interrupt/requested', data: {} },
  );

  test('after:inbox-reserved: once per step whose start claims messages', () => {
    expect(occurrences('after:inbox-reserved', log)).toBe(1);
    expect(occurrences('after:inbox-reserved', events({ type: 'step/start', data: { messageIds: [] } }))).toBe(0);
  });

  test('after:interrupt/requested and after:ask/asked: once per event of that type', () => {
    expect(occurrences('after:interrupt/requested', log)).toBe(1);
    expect(occurrences('after:ask/asked', log)).toBe(2);
  });

  test('after:budget-reserved: once per attempt reservation, not per tool-call reservation', () => {
    const budget = events(
      { type: 'budget/reserved', data: { kind: 'attempt' } },
      { type: 'budget/reserved', data: { kind: 'tool_calls' } },
      { type: 'budget/reserved', data: { kind: 'attempt' } },
    );
    expect(occurrences('after:budget-reserved', budget)).toBe(2);
    expect(occurrences('after:budget-reserved', log)).toBe(0);
  });

  test('the questions the driver answers: asked, and not answered yet', () => {
    expect(pendingQuestions(log)).toEqual(['q_2']);
  });
});
