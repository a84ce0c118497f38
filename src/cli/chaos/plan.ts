import { TREE_FAULT_POINTS } from '../../actors/faults/faults.js';
import { ConfigError } from '../../protocol/errors.js';
import type { ActorEvent } from '../../protocol/events.js';
import { CHAOS_POINTS, modeFor, type ChaosMode, type ChaosPoint } from './modes.js';

export { CHAOS_POINTS, modeFor, type ChaosMode, type ChaosPoint } from './modes.js';


/** Every point a session may name: the tree's points too, which `all` holds for a tree's script. */
const NAMED_POINTS: readonly ChaosPoint[] = [...CHAOS_POINTS, ...TREE_FAULT_POINTS];

/** One kill of a planned run: the `n`-th time `point` is reached, counted across its processes. */
export interface PlannedFault {
  point: string;
  nth: number;
}

/** One run of the scenario: the point it is for, its run mode, and the kills in the order they fire. */
export interface RunPlan {
  point: ChaosPoint;
  /** 1-based run number within the point. */
  run: number;
  mode: ChaosMode;
  faults: PlannedFault[];
}

/**
 * `--points all` or a comma-separated list; anything else is a ConfigError naming the points.
 * `all` holds the points only a tree reaches when the scenario is one (`tree`: its script has
 * agents besides `main`).
 */
export function parsePoints(text: string | undefined, tree = false): ChaosPoint[] {
  const raw = (text ?? 'all').trim();
  if (raw === 'all') return tree ? [...NAMED_POINTS] : [...CHAOS_POINTS];
  const names = raw.split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = names.filter((n) => !(NAMED_POINTS as readonly string[]).includes(n));
  if (names.length === 0 || unknown.length > 0) {
    throw new ConfigError('config.chaos_points', `--points: ${names.length === 0 ? 'no point given' : `unknown point ${unknown.map((u) => `"${u}"`).join(', ')}`}`, {
      hint: `pass all or a comma-separated list of: ${NAMED_POINTS.join(', ')}`,
    });
  }
  // a point named twice would only run twice under one name: --runs says how often
  return NAMED_POINTS.filter((p) => names.includes(p));
}

/**
 * How many times one uninterrupted pass over `events` reaches `point`, from the log alone.
 * `after:<type>` fires once per committed event of that type; the others fire at places each
 * of which leaves one kind of event behind: the first streamed delta of an attempt that
 * answered, a tool execution, an inbox message taken in, a step that claimed inbox messages
 * (`after:inbox-reserved`: its `step/start` names them). `during:recovery` fires once per
 * recovery, which an uninterrupted run never has.
 */
export function occurrences(point: string, events: readonly ActorEvent[]): number {
  const count = (pred: (e: ActorEvent) => boolean): number => events.filter(pred).length;
  if (point === 'after:inbox-reserved') {
    return count((e) => e.type === 'step/start' && (e.data.messageIds?.length ?? 0) > 0);
  }
  // committed with the attempt/start it reserves for
  if (point === 'after:budget-reserved') return count((e) => e.type === 'budget/reserved' && e.data.kind === 'attempt');
  // a job's points fire in the job's own log: its owner's shows one job started per start_job
  // that succeeded, and one notice taken in per job that ended
  if (point === 'after:job/started') return count((e) => e.type === 'tool/result' && e.data.ok && e.data.source === 'tool:start_job');
  if (point === 'before:job/notified') return count((e) => e.type === 'inbox/received' && e.data.kind === 'job_notice' && !e.data.content.includes('"jobId":"wf_'));
  // a node's result is in its run's log: its owner's shows one run started per start_workflow that succeeded
  if (point === 'after:node/ended') return count((e) => e.type === 'tool/result' && e.data.ok && e.data.source === 'tool:start_workflow');
  if (point.startsWith('after:')) {
    const type = point.slice('after:'.length);
    return count((e) => e.type === type);
  }
  if (point === 'before:checkpoint/committed') {
    // once per summary that came back: a compaction attempt that succeeded
    const summaries = new Set(events.filter((e) => e.type === 'attempt/start' && e.data.kind === 'compaction').map((e) => e.attempt));
    return count((e) => e.type === 'attempt/end' && e.data.outcome === 'succeeded' && summaries.has(e.attempt));
  }
  switch (point) {
    case 'mid:model-stream':
      return count((e) => e.type === 'attempt/end' && e.data.outcome === 'succeeded');
    case 'before:tool/result':
      return count((e) => e.type === 'tool/start');
    case 'before:inbox-ack':
      return count((e) => e.type === 'inbox/received');
    case 'before:notice-ack':
      return count((e) => e.type === 'inbox/received' && (e.data.kind === 'subagent_completed' || e.data.kind === 'subagent_report'));
    case 'during:recovery':
      return count((e) => e.type === 'recovery/started');
    default:
      return 0;
  }
}

/**
 * The fault spec a process is started with so that it fires at the plan's n-th occurrence
 * overall: occurrences already in the log (reached by the processes before it) are subtracted,
 * since each process counts from zero. Null when the log already holds the n-th one.
 */
export function faultSpecFor(fault: PlannedFault, logSoFar: readonly ActorEvent[]): string | null {
  // during:recovery is counted per process too, but a log shows no recovery that was killed
  // before it committed anything: each new process that recovers reaches it once more
  const seen = fault.point === 'during:recovery' ? 0 : occurrences(fault.point, logSoFar);
  const nth = fault.nth - seen;
  return nth >= 1 ? `${fault.point}@${nth}=kill` : null;
}

/** mulberry32: a tiny, fast 32-bit PRNG; the same seed gives the same sequence on every machine. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** What `planRuns` needs: how many times a clean run of a mode reaches a point (0: never). */
export type OccurrenceCounts = (point: string, mode: ChaosMode) => number;

/**
 * The runs of a chaos session, point by point. Without a seed every run kills at the first
 * occurrence of its point. With one, each run kills at an occurrence drawn uniformly from those
 * a clean run reaches, by mulberry32 seeded with the seed and the point's name: the same seed
 * picks the same occurrences whatever other points are chosen. `during:recovery` needs a crash
 * to recover from first: a kill at `after:tool/start` (its occurrence drawn the same way), then
 * the kill in the recovery of the process that resumes.
 */
export function planRuns(points: readonly ChaosPoint[], runs: number, seed: number | null, counts: OccurrenceCounts): RunPlan[] {
  const plans: RunPlan[] = [];
  for (const point of points) {
    const mode = modeFor(point);
    const rand = seed === null ? null : mulberry32((seed ^ fnv1a(point)) >>> 0);
    const pick = (of: string): number => {
      const n = counts(of, mode);
      return rand === null || n <= 1 ? 1 : 1 + Math.floor(rand() * n);
    };
    for (let run = 1; run <= runs; run++) {
      const faults =
        point === 'during:recovery'
          ? [{ point: 'after:tool/start', nth: pick('after:tool/start') }, { point, nth: 1 }]
          : [{ point, nth: pick(point) }];
      plans.push({ point, run, mode, faults });
    }
  }
  return plans;
}

/** A plan's kills as one spec list, `after:tool/start@3,during:recovery@1`, for reports. */
export function describeFaults(faults: readonly PlannedFault[]): string {
  return faults.map((f) => `${f.point}@${f.nth}`).join(',');
}
