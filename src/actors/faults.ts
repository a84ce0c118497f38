import type { Logger } from 'pino';
import { ActorloopError, ConfigError } from '../protocol/errors.js';
import type { FaultRecords } from './fault-records.js';

/**
 * Named places in the code where a fault can be injected (design §7), each reached by a clean
 * run of a scenario (chaos sweeps them). Points only a recovery reaches besides
 * `during:recovery` are not listed but can be named: `during:reconcile` (a reconciling tool has
 * answered, its verdict not yet staged). Points only a tree of agents reaches are in
 * `TREE_FAULT_POINTS`.
 */
export const FAULT_POINTS = [
  'after:turn/start',
  'after:step/start',
  'mid:model-stream',
  'after:assistant/accepted',
  'after:tool/start',
  'before:tool/result',
  'before:inbox-ack',
  'after:inbox-reserved',
  'after:interrupt/requested',
  'after:ask/asked',
  // an attempt's budget reservation is committed and nothing is sent yet (a run with a token or cost budget)
  'after:budget-reserved',
  'after:goal/updated',
  'during:recovery',
] as const;

/**
 * Points only a run with subagents reaches: a parent's spawn between its two commits (`after:` of
 * the first fires before the child exists; of the second, once it does), and a parent that has
 * taken a child's completion notice or report into its log but not acked it yet.
 */
export const TREE_FAULT_POINTS = [
  'after:subagent/spawn_requested',
  'after:subagent/spawned',
  'before:notice-ack',
] as const;

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
          hint: `use <point>[:<agentId>][@<n>][=kill|drop], e.g. after:tool/start or mid:model-stream@2; points: ${[...FAULT_POINTS, ...TREE_FAULT_POINTS].join(', ')}`,
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

/** Told of a `kill` fault just before it fires (synchronously: nothing runs after it). */
export type BeforeKill = (hit: { point: string; actorId: string }) => void;

/**
 * A fault injector for the given specs; `kill` SIGKILLs this process, as a crash would. Before
 * it fires it adds a record to `records` (when given), which names the point in the
 * `actor/killed` the recovering incarnation commits, and calls `beforeKill` (the CLI says how to
 * carry the turn on; the injector knows no CLI).
 */
export function createFaultInjector(specs: FaultSpec[], logger?: Logger, records?: FaultRecords, beforeKill?: BeforeKill): FaultInjector {
  if (specs.length === 0) return { hit() {} };
  const counts = new Map<FaultSpec, number>();
  return {
    hit(point, actorId, epoch) {
      for (const spec of specs) {
        if (spec.point !== point) continue;
        if (spec.actorId !== null && spec.actorId !== actorId) continue;
        const n = (counts.get(spec) ?? 0) + 1;
        counts.set(spec, n);
        if (n !== spec.nth) continue;
        logger?.warn({ point, actorId, action: spec.action }, 'fault injected');
        try {
          records?.add({ actorId, point, action: spec.action, epoch: epoch ?? null, pid: process.pid, at: new Date().toISOString() });
        } catch (err) {
          // the fault fires all the same; recovery then says the point is not known
          logger?.warn({ err, actorId }, 'fault record not written');
        }
        if (spec.action === 'kill') {
          try {
            beforeKill?.({ point, actorId });
          } catch {
            // the kill is what was asked for: a failing notice must not stop it
          }
          process.kill(process.pid, 'SIGKILL');
        }
        throw new ActorDropped(point);
      }
    },
  };
}
