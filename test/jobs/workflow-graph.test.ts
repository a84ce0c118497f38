import { describe, expect, it } from 'vitest';
import { initialTransition, transition, type SnapshotFrom } from 'xstate';
import { WorkflowNodeEventSchema, type WorkflowRunEvent } from '../../src/jobs/workflow-events.js';
import { parseWorkflow, type Workflow } from '../../src/jobs/workflow-file.js';
import { compileWorkflow, isEnded, topologicalOrder, type StartNodeParams, type WorkflowRunContext } from '../../src/jobs/workflow-graph.js';
import { CompiledMachine, type CompiledSnapshot } from '../../src/machines/compiled-machine.js';
// seeded, so a failing sequence can be replayed from its seed
import { mulberry32 as prng } from '../../src/cli/chaos/plan.js';

const workflow = (nodes: unknown[]): Workflow => parseWorkflow(JSON.stringify({ name: 'w', nodes }), 'w.json');
const sh = (id: string, more: object = {}) => ({ id, run: 'shell', command: `echo ${id}`, ...more });
const model = (id: string, more: object = {}) => ({
  id,
  run: 'model',
  prompt: 'p',
  output_schema: { type: 'object', properties: { kind: { type: 'string' } } },
  ...more,
});

/** a → b, a → c: the three-node workflow. */
const FORK = workflow([sh('a'), sh('b', { needs: ['a'] }), sh('c', { needs: ['a'] })]);

// events as the log holds them, parsed by their schema so a fixture cannot drift
const started = (node: string, attempt = 1): WorkflowRunEvent => WorkflowNodeEventSchema.parse({ type: 'node/started', data: { node, attempt, jobId: `job_${node}${attempt}` } });
const ended = (node: string, outcome: 'succeeded' | 'failed', more: { attempt?: number; result?: unknown; error?: string } = {}): WorkflowRunEvent =>
  WorkflowNodeEventSchema.parse({ type: 'node/ended', data: { node, attempt: more.attempt ?? 1, outcome, ...more } });

/**
 * A run driven through both engines at once, XState's `transition()` and the CompiledMachine the
 * actors run: every event must leave them in the same state with the same context and effects.
 */
function run(wf: Workflow) {
  const { machine } = compileWorkflow(wf);
  const compiled = new CompiledMachine(machine);
  let fx: StartNodeParams[] = [];
  const sink = (e: { name: string; params: StartNodeParams }): void => {
    expect(e.name).toBe('startNode');
    fx.push(e.params);
  };
  let [xs, xa] = initialTransition(machine);
  let c: CompiledSnapshot = compiled.initial(undefined, sink);
  const agree = (actions: readonly { type: string; params?: unknown }[]): StartNodeParams[] => {
    expect({ value: c.value, context: c.context, status: c.status }).toEqual({ value: xs.value, context: xs.context, status: xs.status });
    expect(actions.map((a) => a.params)).toEqual(fx);
    const out = fx;
    fx = [];
    return out;
  };
  const first = agree(xa);
  return {
    first,
    send(e: WorkflowRunEvent): StartNodeParams[] {
      [xs, xa] = transition(machine, xs, e);
      c = compiled.transition(c, e, sink);
      return agree(xa);
    },
    get state(): string {
      return String(c.value);
    },
    get context(): WorkflowRunContext {
      return c.context as WorkflowRunContext;
    },
    status(id: string): string {
      return (c.context as WorkflowRunContext).nodes[id]!.status;
    },
    snapshot: (): SnapshotFrom<typeof machine> => xs,
    machine,
  };
}

/** What a host that died holds after rehydrating: the log folded through the machine with effects dropped. */
function rehydrate(wf: Workflow, log: WorkflowRunEvent[]) {
  const { machine } = compileWorkflow(wf);
  let s = initialTransition(machine)[0];
  for (const e of log) s = transition(machine, s, e)[0];
  // the new holder restores the persisted snapshot, then says `recover`
  const restored = machine.resolveState({ value: s.value, context: JSON.parse(JSON.stringify(s.context)) });
  const [after, actions] = transition(machine, restored, { type: 'recover' });
  const compiled = new CompiledMachine(machine);
  // either engine restores what the other persisted
  let cs = compiled.initial(undefined, null);
  for (const e of log) cs = compiled.transition(cs, e, null);
  expect(compiled.persist(cs)).toEqual(machine.getPersistedSnapshot(s));
  const fx: StartNodeParams[] = [];
  const c = compiled.transition(compiled.restore({ value: s.value, context: JSON.parse(JSON.stringify(s.context)) }), { type: 'recover' }, (e) => fx.push(e.params));
  expect(c.context).toEqual(after.context);
  expect(fx).toEqual(actions.map((a) => a.params));
  return { starts: fx, snapshot: after };
}

describe('workflow graph', () => {
  it('orders nodes after what they need, keeping file order between independent ones', () => {
    expect(compileWorkflow(FORK).order).toEqual(['a', 'b', 'c']);
    const wf = workflow([sh('d', { needs: ['b', 'c'] }), sh('c', { needs: ['a'] }), sh('b', { needs: ['a'] }), sh('a')]);
    expect(topologicalOrder(wf)).toEqual(['a', 'c', 'b', 'd']);
  });

  it('a → b, a → c: a starts first, then b and c together, and the run succeeds when both have', () => {
    const r = run(FORK);
    expect(r.first).toEqual([{ node: 'a', attempt: 1 }]);
    expect(r.state).toBe('running');
    expect(r.send(started('a'))).toEqual([]);
    expect(r.status('a')).toBe('running');
    expect(r.send(ended('a', 'succeeded', { result: { exitCode: 0 } }))).toEqual([
      { node: 'b', attempt: 1 },
      { node: 'c', attempt: 1 },
    ]);
    r.send(started('b'));
    r.send(started('c'));
    expect(r.send(ended('c', 'succeeded'))).toEqual([]);
    expect(r.state).toBe('running');
    r.send(ended('b', 'succeeded'));
    expect(r.state).toBe('succeeded');
    expect(r.snapshot().status).toBe('done');
    expect(r.context.nodes.a!.result).toEqual({ exitCode: 0 });
  });

  it('a kill after a: recover starts b and c, never a', () => {
    const log = [started('a'), ended('a', 'succeeded')];
    const { starts, snapshot } = rehydrate(FORK, log);
    expect(starts).toEqual([
      { node: 'b', attempt: 1 },
      { node: 'c', attempt: 1 },
    ]);
    expect(snapshot.context.nodes.a!.status).toBe('succeeded');
  });

  it('a kill while b runs and c is asked for: recover asks for both again (same attempt), never a', () => {
    const log = [started('a'), ended('a', 'succeeded'), started('b')];
    expect(rehydrate(FORK, log).starts).toEqual([
      { node: 'b', attempt: 1 },
      { node: 'c', attempt: 1 },
    ]);
    // after c ended, recovery asks for b alone
    expect(rehydrate(FORK, [...log, started('c'), ended('c', 'succeeded')]).starts).toEqual([{ node: 'b', attempt: 1 }]);
  });

  it('a recover of a live run asks again only for what is not ended; a finished run asks for nothing', () => {
    const r = run(FORK);
    r.send(started('a'));
    expect(r.send({ type: 'recover' })).toEqual([{ node: 'a', attempt: 1 }]);
    r.send(ended('a', 'succeeded'));
    r.send(ended('b', 'succeeded'));
    expect(r.send({ type: 'recover' })).toEqual([{ node: 'c', attempt: 1 }]);
    r.send(ended('c', 'succeeded'));
    expect(r.send({ type: 'recover' })).toEqual([]);
    expect(r.state).toBe('succeeded');
  });

  it('a failed a skips b and c and the run fails', () => {
    const r = run(FORK);
    r.send(started('a'));
    expect(r.send(ended('a', 'failed', { error: 'exit code 1' }))).toEqual([]);
    expect([r.status('a'), r.status('b'), r.status('c')]).toEqual(['failed', 'skipped', 'skipped']);
    expect(r.context.nodes.a!.error).toBe('exit code 1');
    expect(r.state).toBe('failed');
  });

  it('an independent branch runs to its end after another fails; the run then fails', () => {
    const r = run(workflow([sh('a'), sh('b'), sh('c', { needs: ['a'] })]));
    expect(r.first).toEqual([
      { node: 'a', attempt: 1 },
      { node: 'b', attempt: 1 },
    ]);
    r.send(ended('a', 'failed'));
    expect(r.status('c')).toBe('skipped');
    expect(r.state).toBe('running');
    r.send(ended('b', 'succeeded'));
    expect(r.state).toBe('failed');
  });

  it('a when that is false skips the node, and what needs it; a true one starts it', () => {
    const wf = workflow([
      model('triage'),
      sh('fix', { needs: ['triage'], when: { node: 'triage', path: 'kind', equals: 'regression' } }),
      sh('report', { needs: ['fix'] }),
      sh('note', { needs: ['triage'], when: { node: 'triage', path: 'kind', not_equals: 'regression' } }),
    ]);
    const no = run(wf);
    expect(no.send(ended('triage', 'succeeded', { result: { kind: 'flake' } }))).toEqual([{ node: 'note', attempt: 1 }]);
    expect([no.status('fix'), no.status('report')]).toEqual(['skipped', 'skipped']);
    no.send(ended('note', 'succeeded'));
    // skipped by a condition is not a failure
    expect(no.state).toBe('succeeded');

    const yes = run(wf);
    expect(yes.send(ended('triage', 'succeeded', { result: { kind: 'regression' } }))).toEqual([{ node: 'fix', attempt: 1 }]);
    expect(yes.status('note')).toBe('skipped');

    // a path that leads nowhere equals nothing
    const missing = run(wf);
    expect(missing.send(ended('triage', 'succeeded', { result: {} }))).toEqual([{ node: 'note', attempt: 1 }]);
  });

  it('retries: a failed attempt with retries left starts the next attempt; the last failure fails the node', () => {
    const r = run(workflow([sh('a', { retries: 2 }), sh('b', { needs: ['a'] })]));
    r.send(started('a', 1));
    expect(r.send(ended('a', 'failed', { attempt: 1, error: 'exit 1' }))).toEqual([{ node: 'a', attempt: 2 }]);
    expect(r.context.nodes.a).toMatchObject({ status: 'pending', attempt: 2, error: 'exit 1' });
    // a late duplicate of attempt 1's end changes nothing
    expect(r.send(ended('a', 'failed', { attempt: 1 }))).toEqual([]);
    expect(r.send(ended('a', 'failed', { attempt: 2 }))).toEqual([{ node: 'a', attempt: 3 }]);
    expect(r.send(ended('a', 'failed', { attempt: 3, error: 'exit 2' }))).toEqual([]);
    expect(r.context.nodes.a).toMatchObject({ status: 'failed', attempt: 3, error: 'exit 2' });
    expect(r.status('b')).toBe('skipped');
    expect(r.state).toBe('failed');

    const ok = run(workflow([sh('a', { retries: 1 }), sh('b', { needs: ['a'] })]));
    ok.send(ended('a', 'failed'));
    expect(ok.send(ended('a', 'succeeded', { attempt: 2 }))).toEqual([{ node: 'b', attempt: 1 }]);
  });

  it('a kill between a failed attempt and its retry asks for the retry, not the failed attempt', () => {
    const wf = workflow([sh('a', { retries: 1 })]);
    expect(rehydrate(wf, [started('a'), ended('a', 'failed')]).starts).toEqual([{ node: 'a', attempt: 2 }]);
  });

  it('ignores events for an unknown node, an ended node and another attempt', () => {
    const r = run(FORK);
    r.send(ended('a', 'succeeded'));
    const before = r.context;
    expect(r.send(started('zz'))).toEqual([]);
    expect(r.send(ended('a', 'failed'))).toEqual([]);
    expect(r.send(started('b', 2))).toEqual([]);
    expect(r.context).toEqual(before);
  });

  it('both engines agree over random event sequences, and no ended node is ever started again', () => {
    const wf = workflow([
      model('m', { retries: 1 }),
      sh('a', { needs: ['m'], retries: 2 }),
      sh('b', { needs: ['m'], when: { node: 'm', path: 'kind', equals: 'x' } }),
      sh('c', { needs: ['a', 'b'] }),
      sh('d'),
    ]);
    const ids = ['m', 'a', 'b', 'c', 'd', 'zz'];
    let runs = 0;
    for (let seed = 1; seed <= 300; seed++) {
      const rand = prng(seed);
      const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
      const r = run(wf);
      for (let i = 0; i < 40 && r.state === 'running'; i++) {
        // mostly a node in play with its current attempt (as a host would send), now and then anything
        const live = Object.entries(r.context.nodes).filter(([, n]) => !isEnded(n.status) && n.asked);
        const [node, attempt] = live.length > 0 && rand() < 0.7 ? ((([id, n]) => [id, n.attempt] as const)(pick(live))) : [pick(ids), pick([1, 2, 3])];
        const e = pick<() => WorkflowRunEvent>([
          () => started(node, attempt),
          () => ended(node, pick(['succeeded', 'succeeded', 'failed'] as const), { attempt, result: { kind: pick(['x', 'y']) } }),
          () => ({ type: 'recover' }),
        ])();
        const endedBefore = Object.entries(r.context.nodes).filter(([, n]) => isEnded(n.status)).map(([id]) => id);
        const starts = r.send(e);
        for (const s of starts) expect(endedBefore).not.toContain(s.node);
      }
      if (r.state !== 'running') runs += 1;
    }
    // the sequences reach the end of a run often
    expect(runs).toBeGreaterThan(50);
  });
});
