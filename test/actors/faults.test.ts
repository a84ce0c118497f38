// The fault injector's runtime arming (fault orders a host takes over the bus), beside the specs
// of --fault and ACTORLOOP_FAULTS, and the host's decision on each order. `kill` is tested in a
// child process (it SIGKILLs its own process); `drop` in this one.
import { spawn } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, describe, expect, test } from 'vitest';
import { faultOrderTaker } from '../../src/actors/faults/fault-order-taker.js';
import { createMemoryFaultRecords } from '../../src/actors/faults/fault-records.js';
import { ActorDropped, createFaultInjector, parseFaultSpecs, type ArmableFaultInjector, type FaultSpec } from '../../src/actors/faults/faults.js';
import { ConfigError } from '../../src/protocol/errors.js';
import { FaultOrderSchema } from '../../src/protocol/fault-orders.js';
import { REPO_ROOT } from '../helpers/cli.js';
import { tempDir } from '../helpers/nats.js';

const A = 'agt_01J00000000000000000000000';
const B = 'agt_01J00000000000000000000001';
const dirs: string[] = [];
afterAll(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

/** The point each hit dropped at, or null when it passed. */
function hits(faults: ArmableFaultInjector, point: string, actorId: string, times: number): Array<string | null> {
  return Array.from({ length: times }, () => {
    try {
      faults.hit(point, actorId, 3);
      return null;
    } catch (err) {
      if (err instanceof ActorDropped) return point;
      throw err;
    }
  });
}

describe('arming at runtime', () => {
  test('an armed spec fires at the n-th hit after it was armed (earlier hits do not count), once, and leaves a record naming its point', () => {
    const records = createMemoryFaultRecords();
    const faults = createFaultInjector([], undefined, records);
    expect(hits(faults, 'after:tool/start', A, 3)).toEqual([null, null, null]);
    faults.arm({ point: 'after:tool/start', actorId: A, nth: 2, action: 'drop' });
    expect(hits(faults, 'after:tool/start', A, 4)).toEqual([null, 'after:tool/start', null, null]);
    expect(records.list(A)).toEqual([expect.objectContaining({ actorId: A, point: 'after:tool/start', action: 'drop', epoch: 3, pid: process.pid })]);
  });

  test('an armed spec for one actor passes every other actor and every other point', () => {
    const faults = createFaultInjector([]);
    faults.arm({ point: 'after:step/start', actorId: A, nth: 1, action: 'drop' });
    expect(hits(faults, 'after:step/start', B, 2)).toEqual([null, null]);
    expect(hits(faults, 'after:turn/start', A, 1)).toEqual([null]);
    expect(hits(faults, 'after:step/start', A, 1)).toEqual(['after:step/start']);
  });

  test('the configured specs keep working beside armed ones, and the caller\'s array is not changed', () => {
    const specs: FaultSpec[] = parseFaultSpecs('mid:model-stream@2=drop');
    const faults = createFaultInjector(specs);
    faults.arm({ point: 'after:turn/start', actorId: A, nth: 1, action: 'drop' });
    expect(specs).toHaveLength(1);
    expect(hits(faults, 'mid:model-stream', B, 2)).toEqual([null, 'mid:model-stream']);
    expect(hits(faults, 'after:turn/start', A, 1)).toEqual(['after:turn/start']);
  });

  test('a spec whose n is not a count from 1 is refused', () => {
    const faults = createFaultInjector([]);
    expect(() => faults.arm({ point: 'after:tool/start', actorId: A, nth: 0, action: 'kill' })).toThrow(ConfigError);
  });

  test('an armed kill, and killNow, SIGKILL the process after writing the record (a child process)', async () => {
    for (const how of ['armed', 'now'] as const) {
      const dir = await tempDir('faults-kill');
      dirs.push(dir);
      const code = [
        `import { createFaultInjector } from './src/actors/faults/faults.ts';`,
        `import { createFileFaultRecords } from './src/actors/faults/fault-records.ts';`,
        `const f = createFaultInjector([], undefined, createFileFaultRecords(${JSON.stringify(dir)}), () => process.stderr.write('before kill\\n'));`,
        how === 'armed'
          ? `f.arm({ point: 'after:tool/start', actorId: '${A}', nth: 1, action: 'kill' }); f.hit('after:tool/start', '${A}', 2);`
          : `f.killNow('${A}', 'now');`,
        `process.stderr.write('still alive\\n');`,
      ].join('\n');
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: REPO_ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      child.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
      const exit = await new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_c, signal) => resolve(signal)));
      expect(exit, err).toBe('SIGKILL');
      expect(err).toContain('before kill');
      expect(err).not.toContain('still alive');
      const [record] = JSON.parse(await readFile(join(dir, `${A}.json`), 'utf8'));
      expect(record).toMatchObject({ actorId: A, point: how === 'armed' ? 'after:tool/start' : 'now', action: 'kill', epoch: how === 'armed' ? 2 : null });
    }
  }, 30_000);
});

describe('a host deciding on a fault order', () => {
  const logger = pino({ level: 'silent' });
  const order = (point: string, nth?: number) => FaultOrderSchema.parse({ actorId: A, point, orderId: 'o1', ...(nth ? { nth } : {}) });
  const recording = () => {
    const armed: FaultSpec[] = [];
    const killed: string[] = [];
    const faults: ArmableFaultInjector = {
      hit() {},
      arm: (s) => void armed.push(s),
      killNow: ((actorId: string, point: string) => void killed.push(`${actorId}@${point}`)) as ArmableFaultInjector['killNow'],
    };
    return { faults, armed, killed };
  };

  test('without --allow-faults every order is refused, and nothing is armed', () => {
    const r = recording();
    const take = faultOrderTaker({ hostId: 'h1', allowFaults: false, holds: () => true, faults: r.faults, logger });
    const out = take(order('after:tool/start'));
    expect(out.reply).toMatchObject({ armed: false, hostId: 'h1', pid: process.pid, code: 'host.faults_disabled' });
    expect(out.reply.armed === false && out.reply.message).toContain('--allow-faults');
    expect(out.then).toBeUndefined();
    expect(r.armed).toEqual([]);
  });

  test('an order for an actor the host does not hold is refused', () => {
    const r = recording();
    const take = faultOrderTaker({ hostId: 'h1', allowFaults: true, holds: () => false, faults: r.faults, logger });
    expect(take(order('after:tool/start')).reply).toMatchObject({ armed: false, code: 'host.not_holding' });
    expect(r.armed).toEqual([]);
  });

  test('a point is armed as a kill for that actor; now kills only once the reply is out (then)', () => {
    const r = recording();
    const take = faultOrderTaker({ hostId: 'h1', allowFaults: true, holds: (id) => id === A, faults: r.faults, logger });
    expect(take(order('after:tool/start', 2)).reply).toEqual({ armed: true, hostId: 'h1', pid: process.pid, point: 'after:tool/start' });
    expect(r.armed).toEqual([{ point: 'after:tool/start', actorId: A, nth: 2, action: 'kill' }]);
    const now = take(order('now'));
    expect(now.reply).toMatchObject({ armed: true, point: 'now' });
    expect(r.killed).toEqual([]);
    now.then!();
    expect(r.killed).toEqual([`${A}@now`]);
  });

  test('a fault order names a listed point or now', () => {
    expect(FaultOrderSchema.safeParse({ actorId: A, point: 'tool.before_start', orderId: 'o1' }).success).toBe(false);
  });
});
