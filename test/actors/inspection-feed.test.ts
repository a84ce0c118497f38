// A host's inspection feed over a real agent actor (memory log, scripted model): nothing is
// attached or reported while nobody watches; a watch attaches an observer to the agent's XState
// actor, a hello reports its states at once, each transition is reported with the event that
// made it, and once the watch lapses the observer lets go.
import { describe, expect, it } from 'vitest';
import { InspectionFeed } from '../../src/actors/hosting/inspection-feed.js';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import { InspectionReportSchema, type InspectionReport } from '../../src/protocol/inspection.js';
import { openAgent, task } from './agent-fixture.js';

const TURN = [{ tool_calls: [{ name: 'echo', arguments: { text: 'hi' } }] }, { content: 'done' }];

/** A feed over a fake clock and publisher, hosting `actor`. */
function feedOf(actor: AgentActor) {
  let now = 1_000;
  const sent: Array<{ subject: string; report: InspectionReport }> = [];
  const feed = new InspectionFeed({
    host: 'h1',
    live: { publish: (subject, payload) => void sent.push({ subject, report: InspectionReportSchema.parse(JSON.parse(payload)) }) },
    agents: {
      rootOf: (id) => (id === actor.actorId ? actor.rootId : undefined),
      refOf: (id) => (id === actor.actorId ? actor.ref : undefined),
    },
    clock: { nowMs: () => now },
    freshMs: 10_000,
  });
  return { feed, sent, advance: (ms: number) => void (now += ms) };
}

async function runTurn(actor: AgentActor): Promise<void> {
  const ended = actor.whenTurnEnds();
  await actor.receive(task(actor.actorId));
  expect((await ended).outcome).toBe('completed');
  await actor.idle();
}

describe('a host\'s inspection feed', () => {
  it('attaches nothing and reports nothing while nobody watches', async () => {
    const { actor } = await openAgent({ script: TURN });
    actor.open();
    const f = feedOf(actor);
    // another actor's watch: this one is still not inspected
    f.feed.watch('agt_other', true);
    await runTurn(actor);
    expect(f.sent).toEqual([]);
    expect(f.feed.inspecting()).toEqual([]);
    actor.stop();
  });

  it('reports a watched actor\'s states at once and each of its transitions, until the watch lapses', async () => {
    const { actor } = await openAgent({ script: [...TURN, ...TURN] });
    actor.open();
    const f = feedOf(actor);
    f.feed.watch(actor.actorId, true);
    expect(f.feed.inspecting()).toEqual([actor.actorId]);
    await runTurn(actor);
    const subject = `inspect.${actor.rootId}.${actor.actorId}`;
    expect(f.sent.every((s) => s.subject === subject)).toBe(true);
    const events = f.sent.map((s) => s.report.event);
    expect(events[0]).toBeNull();
    expect(f.sent[0]!.report).toMatchObject({ v: 1, actorId: actor.actorId, rootId: actor.rootId, host: 'h1', at: 1_000, machines: { agent: 'idle', turn: null } });
    for (const t of ['inbox/received', 'turn/start', 'step/start', 'attempt/start', 'attempt/end', 'tool/call', 'tool/start', 'tool/result', 'turn/end']) expect(events).toContain(t);
    const after = (type: string) => f.sent.find((s) => s.report.event === type)!.report.machines;
    expect(after('attempt/start')).toMatchObject({ agent: { turn: 'running' }, step: { generating: 'attempting' }, attempt: 'streaming' });
    expect(f.sent.at(-1)!.report).toMatchObject({ event: 'turn/end', machines: { agent: 'idle', turn: null } });

    // nobody asked again for longer than the window: the next event finds it lapsed and lets go
    f.advance(10_001);
    const before = f.sent.length;
    await runTurn(actor);
    expect(f.sent.length).toBe(before);
    expect(f.feed.inspecting()).toEqual([]);
    expect(f.feed.watching()).toEqual([]);
    actor.stop();
  });
});
