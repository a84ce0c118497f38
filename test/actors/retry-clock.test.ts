import { expect, it } from 'vitest';
import { verifyLog } from '../../src/verify/verify.js';
import { readLog, runTurn, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, ofType } from './harness.js';

const world = actorTestWorld();
const { rts } = world;

/** A clock that starts now and jumps forward when something sleeps on it. */
function fakeClock() {
  let now = Date.now();
  const slept: number[] = [];
  return {
    slept,
    clock: {
      nowMs: () => now,
      async sleep(ms: number) {
        slept.push(ms);
        now += Math.max(0, ms);
      },
    },
  };
}

it('waits out a two-minute Retry-After on the clock, retries the identical request, and logs both attempts', async () => {
  const rt = await rts.open({ script: [{ error: { type: 'rate_limit', retry_after_ms: 120_000 } }, { content: 'done' }] });
  const { clock, slept } = fakeClock();
  const sup = rt.supervisor({ extra: { clock } });
  const t0 = Date.now();
  const { actor, ended } = await runTurn(sup, 'answer', turnRequest(world.ws));
  expect(ended.outcome).toBe('completed');
  expect(Date.now() - t0).toBeLessThan(10_000);
  expect(slept.length).toBe(1);
  expect(slept[0]).toBeGreaterThanOrEqual(119_000);
  const log = await readLog(sup, actor.rootId, actor.actorId);
  const [firstEnd] = ofType(log, 'attempt/end');
  expect(firstEnd!.data).toMatchObject({ outcome: 'failed', error: { class: 'rate_limit' }, backoffMs: 120_000 });
  const starts = ofType(log, 'attempt/start');
  expect(starts).toHaveLength(2);
  expect(starts[1]!.data.requestDigest).toBe(starts[0]!.data.requestDigest);
  // on the log's own clock the retry began two minutes after the failure
  expect(Date.parse(starts[1]!.at) - Date.parse(firstEnd!.at)).toBeGreaterThanOrEqual(120_000);
  expect(verifyLog(log, { complete: true })).toEqual([]);
});

it('a backoff longer than the deadline is cut short by it: the turn stops on time', async () => {
  const rt = await rts.open({ script: [{ error: { type: 'server', retry_after_ms: 600_000 } }, { content: 'never' }] });
  const sup = rt.supervisor();
  const t0 = Date.now();
  const { actor, ended } = await runTurn(sup, 'answer', turnRequest(world.ws, { deadlineSeconds: 0.5 }));
  expect(ended).toMatchObject({ outcome: 'stopped', reason: 'deadline' });
  expect(Date.now() - t0).toBeLessThan(5_000);
  const log = await readLog(sup, actor.rootId, actor.actorId);
  expect(ofType(log, 'attempt/start')).toHaveLength(1);
  expect(verifyLog(log, { complete: true })).toEqual([]);
});
