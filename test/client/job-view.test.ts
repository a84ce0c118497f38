// What a client shows of a job: its view from its folded log and directory entry, and its row in
// its owner's tree (TreeFold). Fixture logs parsed by the real schemas.
import { describe, expect, it } from 'vitest';
import type { DirectoryEntry } from '../../src/bus/directory.js';
import { durationText, jobPhaseText, jobView } from '../../src/client/job-view.js';
import { TreeFold } from '../../src/client/tree.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { foldJobLog } from '../../src/store/job-projection.js';
import { emptyProjection, foldEvent, type Projection } from '../../src/store/projection.js';
import { JOB_ID, JOB_T0_MS, JobLogBuilder, OWNER_ID } from '../helpers/job-log.js';
import { LogBuilder } from '../actors/log-builder.js';

function entry(labels: Record<string, string> = {}): DirectoryEntry {
  const at = new Date(JOB_T0_MS).toISOString();
  return { actorId: JOB_ID, kind: 'job', parentId: OWNER_ID, rootId: OWNER_ID, status: 'running', title: 'regress', workspace: '/ws', createdAt: at, updatedAt: at, labels };
}

describe('jobView', () => {
  it('shows a waiting job by its place in the queue, and drops the label once it runs', () => {
    const queued = jobView(foldJobLog(new JobLogBuilder().created().events), entry({ queuePosition: '3' }), JOB_T0_MS);
    expect(queued).toMatchObject({ phase: 'pending', queuePosition: 3, durationMs: null, command: 'npm test', cwd: '/ws' });
    expect(jobPhaseText(queued)).toBe('queued #3');
    // the scheduler's label may lag the log: a running job is in no queue
    const b = new JobLogBuilder().created().started();
    const runningView = jobView(foldJobLog(b.events), entry({ queuePosition: '1' }), Date.parse(b.events.at(-1)!.at) + 2_000);
    expect(runningView).toMatchObject({ phase: 'running', queuePosition: null, attempts: 1, host: 'host-a' });
    expect(jobPhaseText(runningView)).toBe('running');
    // timed from its job/started (seq 2), the clock given
    expect(runningView.durationMs).toBe(3_000);
  });

  it('shows how an ended job ended: exit, duration, output, tail', () => {
    const v = jobView(foldJobLog(new JobLogBuilder().created().started().phase('running', 'completed', 'exited').notified().events), entry(), 0);
    expect(v).toMatchObject({ phase: 'completed', reason: 'exited', exitCode: 0, durationMs: 1500, output: { digest: 'sha256:out' }, tail: 'ok 12 tests\n', notified: true });
    expect(durationText(v.durationMs)).toBe('1.5s');
    expect(durationText(125_000)).toBe('2m 05s');
  });
});

describe('TreeFold with a job', () => {
  it("hangs the job under its owner, one level down, its phase as its status; unsettled until its owner has the notice", () => {
    const fold = new TreeFold(OWNER_ID);
    const projections = new Map<string, Projection>();
    const apply = (actorId: string, events: readonly ActorEvent[]): void => {
      for (const event of events) {
        let p = projections.get(actorId);
        if (!p) projections.set(actorId, (p = emptyProjection(actorId)));
        foldEvent(p, event);
        fold.apply({ actorId, event, projection: p });
      }
    };
    apply(OWNER_ID, new LogBuilder().receive('msg_1').startTurn('msg_1').startStep(1).answer('Done.').endStep('final').endTurn().events);
    const b = new JobLogBuilder().created().started().phase('running', 'failed', 'timed_out');
    apply(JOB_ID, b.events);
    const v = fold.view();
    expect(v.agents.map((a) => a.actorId)).toEqual([OWNER_ID, JOB_ID]);
    expect(v.agents[0]!.children).toEqual([JOB_ID]);
    expect(v.agents[1]).toMatchObject({ name: 'regress', parentId: OWNER_ID, depth: 1, status: 'failed', job: { phase: 'failed', reason: 'timed_out', notified: false } });
    expect(v.total.agents).toBe(1);
    expect(v.settled).toBe(false);
    apply(JOB_ID, new JobLogBuilder().created().started().phase('running', 'failed', 'timed_out').notified('failed').events.slice(b.events.length));
    expect(fold.view().settled).toBe(true);
  });
});
