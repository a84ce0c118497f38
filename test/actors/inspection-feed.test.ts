import { describe, expect, it } from 'vitest';
import type { InspectionEvent } from 'xstate';
import { InspectionFeed } from '../../src/actors/inspection-feed.js';
import type { MachineStates } from '../../src/actors/machine-set.js';
import { InspectionReportSchema } from '../../src/protocol/inspection.js';

const STATES: MachineStates = { agent: { turn: 'running' }, turn: 'stepping', step: { generating: 'attempting' }, attempt: 'streaming', calls: {} };

/** A feed over a fake clock and publisher, hosting `agt_a` (root `agt_r`); `reads` counts snapshot reads. */
function feedOf() {
  let now = 1_000;
  const sent: Array<{ subject: string; payload: string }> = [];
  const counts = { reads: 0 };
  const feed = new InspectionFeed({
    host: 'h1',
    live: { publish: (subject, payload) => void sent.push({ subject, payload }) },
    agents: { rootOf: (id) => (id === 'agt_a' ? 'agt_r' : undefined), machinesOf: (id) => (id === 'agt_a' ? STATES : undefined) },
    clock: { nowMs: () => now },
    freshMs: 10_000,
  });
  const snapshot = (actorId: string, type: string): InspectionEvent => ({
    type: '@xstate.snapshot', rootId: 'x:0', actorRef: { systemId: actorId } as never, event: { type },
    snapshot: { get machines() { counts.reads += 1; return STATES; } } as never,
  });
  return { feed, sent, counts, snapshot, advance: (ms: number) => void (now += ms) };
}

describe('a host\'s inspection feed', () => {
  it('reports nothing, and reads no snapshot, while nobody watches', () => {
    const f = feedOf();
    for (let i = 0; i < 100; i++) f.feed.observer(f.snapshot('agt_a', 'tool/result'));
    expect(f.sent).toEqual([]);
    expect(f.counts.reads).toBe(0);
  });

  it('reports a watched actor\'s snapshots (and its states at once on a hello) until its watch lapses', () => {
    const f = feedOf();
    f.feed.watch('agt_a', true);
    f.feed.observer(f.snapshot('agt_a', 'attempt/start'));
    // another actor, unwatched, and an event that is not a snapshot: nothing
    f.feed.observer(f.snapshot('agt_b', 'attempt/start'));
    f.feed.observer({ type: '@xstate.event', rootId: 'x:0', actorRef: { systemId: 'agt_a' } as never, event: { type: 'x' }, sourceRef: undefined } as InspectionEvent);
    const reports = f.sent.map((s) => ({ subject: s.subject, r: InspectionReportSchema.parse(JSON.parse(s.payload)) }));
    expect(reports.map((x) => [x.subject, x.r.event])).toEqual([['inspect.agt_r.agt_a', null], ['inspect.agt_r.agt_a', 'attempt/start']]);
    expect(reports[1]!.r).toMatchObject({ v: 1, actorId: 'agt_a', rootId: 'agt_r', host: 'h1', at: 1_000, machines: STATES });
    // asked again within the window: still reported; then nobody asks for longer than it
    f.advance(9_000);
    f.feed.watch('agt_a', false);
    f.advance(9_000);
    f.feed.observer(f.snapshot('agt_a', 'attempt/end'));
    expect(f.sent).toHaveLength(3);
    f.advance(1_001);
    f.feed.observer(f.snapshot('agt_a', 'step/end'));
    expect(f.sent).toHaveLength(3);
    expect(f.feed.watching()).toEqual([]);
  });

  it('does not report an actor it does not host (another host runs it, or it is still replaying its log)', () => {
    const f = feedOf();
    f.feed.watch('agt_b', true);
    f.feed.observer(f.snapshot('agt_b', 'turn/start'));
    expect(f.sent).toEqual([]);
    expect(f.feed.watching()).toEqual(['agt_b']);
  });
});
