import type { Logger } from 'pino';
import { ActorloopError, ConfigError } from '../../protocol/errors.js';
import { COMPACTION_FAULT_POINTS, FAULT_POINTS, JOB_FAULT_POINTS, TREE_FAULT_POINTS, WORKFLOW_FAULT_POINTS } from '../../protocol/fault-points.js';
import type { FaultRecords } from './fault-records.js';

// The named points are protocol (a fault order names one): defined there, exported here as before.
export { COMPACTION_FAULT_POINTS, FAULT_POINTS, JOB_FAULT_POINTS, TREE_FAULT_POINTS, WORKFLOW_FAULT_POINTS } from '../../protocol/fault-points.js';

/** One parsed fault spec: `<point>[:<actorId>][@<n>][=kill|drop]`. */
export interface FaultSpec {
  point: string;
  actorId: string | null;
  /** Fires the n-th time the point is reached (1-based). */
  nth: number;
  action: 'kill' | 'drop';
}

const SPEC = /^((?:after|before|mid|during):[a-z][a-z/_-]*)(?::([a-z]+_[0-9A-Za-z]+))?(?:@(\d+))?(?:=(kill|drop))?$/;

/** Parses a comma-separated list of fault specs; a bad one is a ConfigError saying the form. */
export function parseFaultSpecs(text: string | undefined | null): FaultSpec[] {
  if (!text) return [];
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const m = SPEC.exec(s);
      if (!m) {
        throw new ConfigError('config.fault', `invalid fault spec "${s}"`, {
          hint: `use <point>[:<agentId>][@<n>][=kill|drop], e.g. after:tool/start or mid:model-stream@2; points: ${[...FAULT_POINTS, ...TREE_FAULT_POINTS, ...COMPACTION_FAULT_POINTS, ...JOB_FAULT_POINTS, ...WORKFLOW_FAULT_POINTS].join(', ')}`,
        });
      }
      const nth = m[3] ? Number(m[3]) : 1;
      if (nth < 1) throw new ConfigError('config.fault', `invalid fault spec "${s}": @n counts from 1`);
      return { point: m[1]!, actorId: m[2] ?? null, nth, action: (m[4] as 'kill' | 'drop' | undefined) ?? 'kill' };
    });
}

/** Thrown at a `drop` fault: the actor stops where it is, closing nothing. */
export class ActorDropped extends ActorloopError {
  constructor(point: string) {
    super('actor.dropped', `actor dropped by fault injection at ${point}`);
  }
}

/** Checks fault points as the code passes them. */
export interface FaultInjector {
  /**
   * Called at a named point by the incarnation of `actorId` with `epoch` (when the caller knows
   * it); may SIGKILL the process or throw ActorDropped.
   */
  hit(point: string, actorId: string, epoch?: number): void;
}

/**
 * A fault injector that also takes faults while it runs: a fault order a host was given over the
 * bus (`actorloop host --allow-faults`) arms a spec beside the ones of `--fault` and
 * `ACTORLOOP_FAULTS`, or kills at once.
 */
export interface ArmableFaultInjector extends FaultInjector {
  /**
   * Adds a spec from now on; its `nth` counts the times the point is reached after this call
   * (hits before it do not count). It fires once, as a configured spec does.
   */
  arm(spec: FaultSpec): void;
  /**
   * Fires a `kill` for `actorId` now, as a spec reaching its point would: the record (naming
   * `point`), `beforeKill`, the SIGKILL. Never returns.
   */
  killNow(actorId: string, point: string, epoch?: number): never;
}

/** Told of every fault as it fires, before `BeforeKill`: a person's line in place of the log's. */
export type FaultNotice = (hit: { point: string; actorId: string; action: FaultSpec['action'] }) => void;

/** Told of a `kill` fault just before it fires (synchronously: nothing runs after it). */
export type BeforeKill = (hit: { point: string; actorId: string }) => void;

/**
 * A fault injector for the given specs; `kill` SIGKILLs this process, as a crash would. Before
 * it fires it adds a record to `records` (when given), which names the point in the
 * `actor/killed` the recovering incarnation commits, and calls `beforeKill` (the CLI says how to
 * carry the turn on; the injector knows no CLI). More specs may be armed while it runs (`arm`).
 */
export function createFaultInjector(specs: FaultSpec[], logger?: Logger, records?: FaultRecords, beforeKill?: BeforeKill, onFire?: FaultNotice): ArmableFaultInjector {
  // a copy: an armed spec must not show up in the caller's array
  const active = [...specs];
  const counts = new Map<FaultSpec, number>();
  const fire = (spec: Pick<FaultSpec, 'point' | 'action'>, actorId: string, epoch: number | undefined): never => {
    const { point, action } = spec;
    // a caller that tells a person itself (the CLI) keeps the log line out of their output
    if (onFire) {
      logger?.debug({ point, actorId, action }, 'fault injected');
      onFire({ point, actorId, action });
    } else logger?.warn({ point, actorId, action }, 'fault injected');
    try {
      records?.add({ actorId, point, action, epoch: epoch ?? null, pid: process.pid, at: new Date().toISOString() });
    } catch (err) {
      // the fault fires all the same; recovery then says the point is not known
      logger?.warn({ err, actorId }, 'fault record not written');
    }
    if (action === 'kill') {
      try {
        beforeKill?.({ point, actorId });
      } catch {
        // the kill is what was asked for: a failing notice must not stop it
      }
      process.kill(process.pid, 'SIGKILL');
    }
    throw new ActorDropped(point);
  };
  return {
    hit(point, actorId, epoch) {
      for (const spec of active) {
        if (spec.point !== point) continue;
        if (spec.actorId !== null && spec.actorId !== actorId) continue;
        const n = (counts.get(spec) ?? 0) + 1;
        counts.set(spec, n);
        if (n !== spec.nth) continue;
        fire(spec, actorId, epoch);
      }
    },
    arm(spec) {
      if (!Number.isInteger(spec.nth) || spec.nth < 1) throw new ConfigError('config.fault', `invalid fault spec for ${spec.point}: n counts from 1`);
      active.push({ ...spec });
    },
    killNow(actorId, point, epoch) {
      return fire({ point, action: 'kill' }, actorId, epoch);
    },
  };
}
