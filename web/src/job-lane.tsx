import type { ActorEvent } from '../../src/protocol/events.js';
import type { JobPhase } from '../../src/protocol/job-events.js';
import type { ActorState } from './fold.js';
import type { TreeRow } from './tree.js';

// The timeline's job lane: every job of the tree, one row each, as a bar from its first execution's
// start (`job/started`) to its end (its terminal `job/phase`), coloured by the phase it is in at the
// position shown and named by its job name; a job not started yet (queued) is a thin bar from its
// creation. A bar still open runs to the latest event shown. Clicking one selects the job. Each bar
// carries its times and phase (`data-from`, `data-to`, `data-phase`) for whoever reads the page.

/** One job's bar as its log says up to the position shown. */
export interface JobBar {
  id: string;
  name: string;
  phase: JobPhase;
  /** Its first `job/started` (null: it never started: `from` is its creation). */
  startedAt: number | null;
  from: number;
  /** Its end; null while it has not ended. */
  to: number | null;
  attempts: number;
}

/** The bar of a job from its events (its `job` state folded from the same). */
export function jobBarOf(row: TreeRow, a: ActorState | undefined): JobBar | null {
  if (!a?.job) return null;
  let created: number | null = null;
  let started: number | null = null;
  let ended: number | null = null;
  for (const e of a.events as readonly ActorEvent[]) {
    const t = Date.parse(e.at);
    if (e.type === 'job/created') created ??= t;
    if (e.type === 'job/started') started ??= t;
    if (e.type === 'job/phase' && e.data.end !== null) ended = t;
  }
  return { id: row.id, name: a.job.name, phase: a.job.phase, startedAt: started, from: started ?? created ?? Date.parse(a.events[0]!.at), to: ended, attempts: a.job.attempts };
}

/** What a job bar's colour means, for the legend (the colours are the stylesheet's). */
export const JOB_LEGEND: Array<{ cls: string; label: string }> = [
  { cls: 'job-pending', label: 'job queued or restarting' }, { cls: 'job-running', label: 'job running' },
  { cls: 'job-completed', label: 'job completed' }, { cls: 'job-failed', label: 'job failed' },
  { cls: 'job-cancelled', label: 'job cancelled' }, { cls: 'job-interrupted', label: 'job interrupted or reconciling' },
];

/** Height of one job's row in the lane (px). */
export const JOB_ROW = 16;

interface JobLaneProps {
  bars: JobBar[];
  y0: number;
  x: (t: number) => number;
  /** The latest event shown: where a bar still open ends. */
  latest: number;
  width: number;
  selected: string | null;
  onSelect?: (id: string) => void;
}

/** The job lane: one row per job of the tree. */
export function JobLane({ bars, y0, x, latest, width, selected, onSelect }: JobLaneProps) {
  const height = bars.length * JOB_ROW + 8;
  return (
    <g class="lane job-lane" data-testid="job-lane">
      <rect class="lane-bg" x={0} y={y0} width={width} height={height - 2} />
      <text class="lane-label" x={4} y={y0 + 14}>jobs</text>
      {bars.map((b, k) => {
        const y = y0 + 4 + k * JOB_ROW;
        const bx = x(b.from);
        const w = Math.max(3, x(b.to ?? latest) - bx);
        const queued = b.startedAt === null;
        const cls = `job-bar job-${b.phase === 'reconciling' ? 'interrupted' : b.phase}${b.to === null ? ' open' : ''}${queued ? ' queued' : ''}${b.id === selected ? ' selected' : ''}`;
        return (
          <g key={b.id} class={cls} data-job={b.id} data-phase={b.phase} data-from={b.from} data-to={b.to ?? ''} onClick={() => onSelect?.(b.id)}>
            <rect x={bx} y={queued ? y + 4 : y} width={w} height={queued ? JOB_ROW - 11 : JOB_ROW - 3} />
            <text class="job-bar-label" x={bx + 3} y={y + JOB_ROW - 6}>{b.name}</text>
            <title>{`${b.name} · ${b.phase}${b.attempts > 1 ? ` · attempt ${b.attempts}` : ''}: ${b.to === null ? (queued ? 'not started' : 'running') : `${b.to - b.from} ms`}`}</title>
          </g>
        );
      })}
    </g>
  );
}

/** The lane's height for `n` jobs (0: none, no lane). */
export function jobLaneHeight(n: number): number {
  return n === 0 ? 0 : n * JOB_ROW + 8;
}
