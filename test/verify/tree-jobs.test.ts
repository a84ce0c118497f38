// verify --tree over a tree with a job: the job's log is checked as a job's (not an agent's turns),
// it is linked to the tree by its owner's start_job call, and a job still under way keeps the tree
// running. Fixture logs parsed by the real schemas.
import { describe, expect, it } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { jobIdOf } from '../../src/protocol/job-events.js';
import { treeOk, verifyTree } from '../../src/verify/tree.js';
import { ACTOR, LogBuilder } from '../actors/log-builder.js';
import { JobLogBuilder } from '../helpers/job-log.js';

/** The owner's turn: a start_job call (call_1) that succeeded, then its answer. */
function ownerLog(): ActorEvent[] {
  return new LogBuilder().receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt().acceptCall('start_job')
    .call({ name: 'start_job', effects: 'possible', recovery: 'manual' }).startTool('call_1', { name: 'start_job', effects: 'possible' }).result('call_1')
    .endStep('tool_calls', 1).startStep(2).answer('Started.').endStep('final').endTurn('completed', 'Started.').events;
}

const JOB = jobIdOf('call_1');
const job = (): JobLogBuilder => new JobLogBuilder().created({ jobId: JOB, ownerId: ACTOR, rootId: ACTOR, callId: 'call_1' });
const tree = (jobLog: ActorEvent[], owner = ownerLog()): Map<string, ActorEvent[]> => new Map([[ACTOR, owner], [JOB, jobLog]]);
const codes = (v: ReturnType<typeof verifyTree>): string[] => [...v.tree.map((t) => t.code), ...v.actors.flatMap((a) => a.violations.map((x) => x.code))];

describe('verifyTree with jobs', () => {
  it('passes a settled tree whose job completed and told its owner, and names no job as an unrequested child', () => {
    const v = verifyTree(tree(job().started().phase('running', 'completed', 'exited').notified().events), ACTOR);
    expect(codes(v)).toEqual([]);
    expect(v.running).toEqual([]);
    expect(treeOk(v)).toBe(true);
    expect(v.actors.map((a) => a.actorId)).toEqual([ACTOR, JOB]);
  });

  it('keeps the tree running while a job runs or owes its notice, and says which', () => {
    const runningJob = verifyTree(tree(job().started().events), ACTOR);
    expect(runningJob.running).toEqual([`job ${JOB} is running`]);
    expect(codes(runningJob)).toEqual([]);
    const owed = verifyTree(tree(job().started().phase('running', 'failed', 'executor_error').events), ACTOR);
    expect(owed.running).toEqual([`job ${JOB} still owes ${ACTOR} the notice that it ended failed`]);
  });

  it("reports a job's own violations in its log's verdict", () => {
    const b = job().started().phase('running', 'completed', 'exited');
    b.phase('completed', 'failed', 'executor_error');
    const v = verifyTree(tree(b.notified().events), ACTOR, { complete: true });
    expect(v.actors.find((a) => a.actorId === JOB)?.violations.map((x) => x.code)).toEqual(['job.ended_twice']);
  });

  it('reports a job whose owner is not in the tree, or never started it', () => {
    const done = job().started().phase('running', 'completed', 'exited').notified().events;
    const orphan = verifyTree(new Map([[JOB, done]]), JOB, { complete: true });
    expect(orphan.tree.map((t) => t.code)).toContain('tree.job_unowned');
    // the owner's log without the start_job call's result
    const owner = ownerLog().filter((e) => !(e.type === 'tool/result' && e.call === 'call_1'));
    const unstarted = verifyTree(tree(done, owner), ACTOR, { complete: true });
    expect(unstarted.tree.filter((t) => t.actorId === JOB).map((t) => t.code)).toEqual(['tree.job_unowned']);
  });
});
