import { describe, expect, it } from 'vitest';
import { machineDefinitions, type StateDefinition } from '../../src/client/machine-definitions.js';
import { turnRequest } from '../helpers/runtime.js';
import { answer, call, treeModels } from '../helpers/scripted-tree.js';
import { actorTestWorld, startTurn } from '../actors/harness.js';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import { machinesOf } from '../../web/src/active-states.js';
import { foldTree, statusOf } from '../../web/src/fold.js';
import { approvalMessage, questionAnswerMessage } from '../../src/client/messages.js';
import { activeStates } from '../../src/server/machine-states.js';
import { pendingApprovals, pendingQuestions } from '../../src/store/projection.js';
import type { StreamEvent } from '../../web/src/stream-event.js';

// The page lights states by name: every name it derives from a real run's log, at every position
// of the stream, must be a state of the machine the gateway serves, so a renamed state fails here.

const world = actorTestWorld();

function paths(states: Record<string, StateDefinition>, prefix = ''): string[] {
  return Object.entries(states).flatMap(([k, s]) => [prefix + k, ...paths(s.states ?? {}, `${prefix}${k}.`)]);
}

describe('the page\'s active states', () => {
  it('are states of the served machines at every position of a real run, and end where the run ended', async () => {
    const rt = await world.rts.open({
      modelFor: treeModels({
        main: [
          call('spawn_agent', { task: 'read src/a.txt', name: 'reader', mode: 'foreground' }),
          call('read_file', { path: 'src/a.txt' }),
          answer('alpha'),
        ],
        reader: [call('read_file', { path: 'src/a.txt' }), answer('the first line is alpha')],
      }),
    });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'read', turnRequest(world.ws));
    expect((await ended).outcome).toBe('completed');
    const stream: StreamEvent[] = [];
    for await (const { event, streamSeq } of sup.reader.readTree(actor.rootId)) stream.push({ event, streamSeq });
    const known = new Map(machineDefinitions().machines.map((m) => [m.id, new Set(paths(m.states))]));
    const seen = new Set<string>();
    for (let n = 1; n <= stream.length; n++) {
      for (const a of foldTree(stream, n).values()) {
        for (const v of machinesOf(a)) {
          if (v.active === null) continue;
          expect(known.get(v.machine)!.has(v.active), `${v.machine}: ${v.active} at ${n}`).toBe(true);
          seen.add(`${v.machine}:${v.active}`);
        }
      }
    }
    // the walk went through the states a plain tool loop takes
    for (const s of ['agent:turn.running', 'turn:stepping', 'step:generating.attempting', 'step:tools', 'attempt:succeeded', 'tool-call:starting', 'tool-call:started', 'tool-call:result']) expect(seen).toContain(s);
    const last = foldTree(stream, stream.length);
    const main = last.get(actor.actorId)!;
    expect(statusOf(main)).toBe('completed');
    expect(Object.fromEntries(machinesOf(main).map((v) => [v.machine, v.active]))).toMatchObject({ agent: 'idle', turn: 'done', step: 'done', 'tool-call': 'result' });
  });

  it('wait in turn.waiting_approval while either of two approvals of a step is open, as the gateway reads the log, with the waiting calls\' charts first', async () => {
    const writes = { tool_calls: [{ name: 'write_file', arguments: { path: 'one.txt', content: '1\n' } }, { name: 'write_file', arguments: { path: 'two.txt', content: '2\n' } }] };
    const rt = await world.rts.open({ script: [writes, answer('wrote both')] });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'write two files', turnRequest(world.ws, { approvalMode: 'ask' }));
    const ids = await actor.whenAwaitingApproval();
    expect(ids).toHaveLength(2);
    // the actor's own machine waits there too, and says so as its status
    expect(actor.ref.getSnapshot().machines.agent).toEqual({ turn: 'waiting_approval' });
    expect(actor.ref.getSnapshot().agentStatus).toBe('waiting_approval');
    const digest = (id: string) => actor.projection.approvals![id]!.planDigest;
    await sup.send(approvalMessage(actor.actorId, ids[0]!, digest(ids[0]!), { decision: 'approve', always: false }));
    await sup.send(approvalMessage(actor.actorId, ids[1]!, digest(ids[1]!), { decision: 'approve', always: false }));
    expect((await ended).outcome).toBe('completed');
    const stream: StreamEvent[] = [];
    for await (const { event, streamSeq } of sup.reader.readTree(actor.rootId)) stream.push({ event, streamSeq });
    const seen = new Set<string>();
    for (let n = 1; n <= stream.length; n++) {
      const a = foldTree(stream, n).get(actor.actorId)!;
      const views = machinesOf(a);
      const agent = views[0]!;
      expect(agent.machine).toBe('agent');
      seen.add(agent.active!);
      const open = pendingApprovals(a.projection).length;
      const at = `at ${n} (${stream[n - 1]!.event.type})`;
      // the page's fold and the gateway's read of the same log name the same agent state in a turn
      if (a.projection.openTurn) expect(agent.active, at).toBe(activeStates(a.projection).agent);
      expect(agent.active === 'turn.waiting_approval', at).toBe(open > 0);
      // the calls waiting for a person come right after the agent, before the turn, step and attempt
      const waiting = views.filter((v) => v.active === 'awaiting_approval.waiting');
      expect(waiting, at).toHaveLength(open);
      expect(views.slice(1, 1 + open), at).toEqual(waiting);
    }
    expect(seen).toContain('turn.waiting_approval');
    expect(seen).toContain('turn.running');
  });

  it('wait in turn.waiting_input while a question is open, with the asking call\'s chart right after the agent\'s', async () => {
    const ask = { tool_calls: [{ name: 'ask_user', arguments: { question: 'Which colour?', options: [{ id: 'red', label: 'Red' }, { id: 'blue', label: 'Blue' }] } }] };
    const rt = await world.rts.open({ script: [ask, answer('blue it is')] });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'pick a colour', turnRequest(world.ws));
    const [questionId] = await actor.whenAwaitingQuestion();
    expect(actor.ref.getSnapshot().machines.agent).toEqual({ turn: 'waiting_input' });
    await sup.send(questionAnswerMessage(actor.actorId, questionId!, { optionId: 'blue' }));
    expect((await ended).outcome).toBe('completed');
    const stream: StreamEvent[] = [];
    for await (const { event, streamSeq } of sup.reader.readTree(actor.rootId)) stream.push({ event, streamSeq });
    let waited = 0;
    for (let n = 1; n <= stream.length; n++) {
      const a = foldTree(stream, n).get(actor.actorId)!;
      const views = machinesOf(a);
      const open = pendingQuestions(a.projection).length > 0;
      const at = `at ${n} (${stream[n - 1]!.event.type})`;
      if (a.projection.openTurn) expect(views[0]!.active, at).toBe(activeStates(a.projection).agent);
      expect(views[0]!.active === 'turn.waiting_input', at).toBe(open);
      if (!open) continue;
      waited += 1;
      expect(views[1], at).toMatchObject({ machine: 'tool-call', active: 'started' });
      expect(views[1]!.title, at).toContain('ask_user');
    }
    expect(waited).toBeGreaterThan(0);
  });

  it('read a host killed mid-call as killed, then recovering, then running again with the call started anew', async () => {
    const rt = await world.rts.open({ script: [call('read_file', { path: 'src/a.txt' }), answer('alpha and beta')] });
    // the drop leaves a record of its point, as a kill does, for the recovery's actor/killed
    const dying = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs('after:tool/start=drop'), undefined, rt.faultRecords) });
    const { actor, ended } = await startTurn(dying, 'read', turnRequest(world.ws));
    await expect(ended).rejects.toMatchObject({ code: 'actor.dropped' });
    const sup = rt.supervisor();
    let done: Promise<unknown> | null = null;
    await sup.hydrate(actor.actorId, (a) => void (done = a.whenTurnEnds()));
    await done;
    const stream: StreamEvent[] = [];
    for await (const { event, streamSeq } of sup.reader.readTree(actor.rootId)) stream.push({ event, streamSeq });
    const at = (type: string) => stream.findIndex((e) => e.event.type === type) + 1;
    const stateAt = (n: number) => {
      const a = foldTree(stream, n).get(actor.actorId)!;
      return { status: statusOf(a), call: machinesOf(a).find((v) => v.machine === 'tool-call')?.active };
    };
    expect(stateAt(at('actor/killed') - 1)).toEqual({ status: 'running', call: 'started' });
    expect(stateAt(at('actor/killed'))).toEqual({ status: 'killed', call: 'started' });
    expect(stateAt(at('actor/rehydrated'))).toEqual({ status: 'recovering', call: 'started' });
    expect(stateAt(at('actor/rehydrated') + 1).status).toBe('running');
    expect(stateAt(stream.length)).toEqual({ status: 'completed', call: 'result' });
  });
});
