import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultTooling } from '../../src/actors/agent/tooling.js';
import { findBubblewrap } from '../../src/tools/sandbox.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import { JobNoticeSchema, jobIdOf } from '../../src/protocol/job-events.js';
import { foldJobLog } from '../../src/store/job-projection.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, ofType, startTurn, waitForLog } from '../actors/harness.js';
import { answer, call, treeModels } from '../helpers/scripted-tree.js';

const world = actorTestWorld();
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp' };

async function sandboxed() {
  const bwrapPath = await findBubblewrap(env.PATH);
  expect(bwrapPath, 'bubblewrap must work here (.ci/run installs it)').not.toBeNull();
  return defaultTooling({ bwrapPath, env });
}

describe('jobs started by the model', () => {
  it('a job appends a line after 2 s; the turn ends first; its notice starts a new turn with source job_notice', async () => {
    const rt = await world.rts.open({
      modelFor: treeModels({
        main: [
          call('start_job', { name: 'append', command: 'sleep 2 && echo done >> job-out.txt && echo finished' }),
          answer('started it'),
          answer('the job finished'),
        ],
      }),
    });
    const sup = rt.supervisor({ extra: { tooling: await sandboxed() } });
    const { actor, ended } = await startTurn(sup, 'run it in the background', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    const t0 = Date.now();
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    expect(Date.now() - t0, 'the turn does not wait for the job').toBeLessThan(2_000);
    const log = await waitForLog(sup, actor, (l) => ofType(l, 'turn/end').length === 2, 20_000);
    const starts = ofType(log, 'turn/start');
    expect(starts[1]!.data.source).toBe('job_notice');
    const started = ofType(log, 'tool/result')[0]!;
    const jobId = jobIdOf(started.call!);
    expect(started.data.output).toContain(jobId);
    const jobLog = await readLog(sup, actor.rootId, jobId);
    const state = foldJobLog(jobLog)!;
    expect(state).toMatchObject({ phase: 'completed', reason: 'exited', attempts: 1, ownerId: actor.actorId });
    expect(state.end).toMatchObject({ exitCode: 0, tail: 'finished\n' });
    expect(Buffer.from((await rt.blobs.get(state.end!.output!.digest))!).toString('utf8')).toBe('finished\n');
    expect(await readFile(join(world.ws, 'job-out.txt'), 'utf8')).toBe('done\n');
    const notice = ofType(log, 'inbox/received').find((e) => e.data.kind === 'job_notice')!;
    expect(JobNoticeSchema.parse(JSON.parse(notice.data.content))).toMatchObject({ jobId, phase: 'completed', exitCode: 0 });
    await waitForLog(sup, { rootId: actor.rootId, actorId: jobId }, (l) => l.some((e) => e.type === 'job/notified'));
    for (const l of [log, await readLog(sup, actor.rootId, jobId)]) {
      const v = verifyLog(l);
      expect(v, formatViolations(v)).toEqual([]);
    }
  });
});
