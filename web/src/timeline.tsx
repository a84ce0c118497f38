import { memo } from 'preact/compat';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { ActorEvent } from '../../src/protocol/events.js';
import type { ActorState } from './fold.js';
import { durationText, timeText } from './format.js';
import { JOB_LEGEND, JobLane, jobBarOf, jobLaneHeight, type JobBar } from './job-lane.js';
import type { TreeRow } from './tree.js';

// A timeline like Temporal's: per actor (children as nested lanes), its turns, steps, attempts,
// tool calls and waits as bars over time (a compaction's summary attempt apart from the step's own
// model attempts); kills, recoveries, failures (a failed attempt, a denied or unknown tool call, a
// turn that failed), checkpoints and the compactions refused that ended their step as marks; a time axis from the tree's first
// event, a legend, and the panel's whole width. A bar still open runs to the latest event shown. Each actor's bars are folded once per event (kept by its event
// array), only the lanes in view are drawn, and the axis runs to a step past the latest event, so
// a new event redraws the lanes whose bars it moved, not every bar of the tree.
// Each bar carries its times (`data-from`, `data-to`: ms since the epoch, empty while open) for
// whoever reads the page, not only its eyes.

type Kind = 'turn' | 'step' | 'attempt' | 'tool' | 'wait';
interface Bar { kind: Kind; label: string; from: number; to: number | null; failed?: boolean; summary?: boolean }
type MarkKind = 'killed' | 'rehydrated' | 'failed' | 'checkpoint' | 'compaction-rejected';
interface Mark { kind: MarkKind; at: number; label: string }

/** What a bar's or mark's colour means, for the legend (the colours are the stylesheet's). */
const LEGEND: Array<{ cls: string; label: string }> = [
  { cls: 'bar-turn', label: 'turn' }, { cls: 'bar-step', label: 'step' }, { cls: 'bar-attempt', label: 'model attempt' },
  { cls: 'bar-summary', label: 'summary attempt (compaction)' },
  { cls: 'bar-tool', label: 'tool call' }, { cls: 'bar-wait', label: 'waiting (approval, answer, children)' },
  { cls: 'mark-killed', label: 'killed' }, { cls: 'mark-rehydrated', label: 'recovered' }, { cls: 'mark-failed', label: 'failed' },
  { cls: 'mark-checkpoint', label: 'checkpoint (compacted)' }, { cls: 'mark-compaction-rejected', label: 'compaction refused, step ended' },
];

/** The mark a compaction leaves: a checkpoint committed, or a refusal that ended its step; null: none. */
function compactionMark(e: ActorEvent, at: number): Mark | null {
  if (e.type === 'checkpoint/committed') {
    const saved = e.data.tokensBefore - e.data.tokensAfter;
    return { kind: 'checkpoint', at, label: `checkpoint −${saved} tokens (${e.data.tokensBefore} → ${e.data.tokensAfter}) · ${e.data.id}` };
  }
  if (e.type === 'compaction/rejected' && e.data.endsStep) return { kind: 'compaction-rejected', at, label: `compaction refused (${e.data.reason}): ${e.data.message}` };
  return null;
}

/** An event that says something failed, in words; null: it does not. */
function failureOf(e: ActorEvent): string | null {
  switch (e.type) {
    case 'attempt/end': return e.data.outcome === 'failed' || e.data.outcome === 'overflow' ? `attempt ${e.data.outcome}${e.data.error ? `: ${e.data.error.class}` : ''}` : null;
    case 'tool/denied': return `tool denied: ${e.data.reason}`;
    case 'tool/outcome_unknown': return `outcome unknown: ${e.data.reason}`;
    case 'turn/end': return e.data.outcome === 'failed' ? `turn failed${e.data.reason ? `: ${e.data.reason}` : ''}` : null;
    default: return null;
  }
}

const OPENS: Partial<Record<ActorEvent['type'], Kind>> = { 'turn/start': 'turn', 'step/start': 'step', 'attempt/start': 'attempt', 'tool/call': 'tool', 'approval/requested': 'wait', 'ask/asked': 'wait', 'subagent/waiting': 'wait' };
const ROWS: Kind[] = ['turn', 'step', 'attempt', 'tool', 'wait'];

function keyOf(kind: Kind, e: ActorEvent): string {
  if (kind === 'turn') return `turn:${e.turn}`;
  if (kind === 'step') return `step:${e.step}`;
  if (kind === 'attempt') return `attempt:${e.attempt}`;
  if (kind === 'tool') return `tool:${e.call}`;
  return `wait:${e.call}`;
}

function closes(e: ActorEvent): string[] {
  switch (e.type) {
    case 'turn/end': return [`turn:${e.turn}`];
    case 'step/end': return [`step:${e.step}`];
    case 'attempt/end': return [`attempt:${e.attempt}`];
    case 'tool/result': case 'tool/denied': case 'tool/cancelled': case 'tool/outcome_unknown': return [`tool:${e.call}`, `wait:${e.call}`];
    case 'approval/granted': case 'approval/denied': case 'ask/answered': case 'subagent/completed': return [`wait:${e.call}`];
    default: return [];
  }
}

/** An actor's bars folded so far: kept between renders, so each event is read once. */
interface Lane { folded: number; bars: Bar[]; marks: Mark[]; open: Map<string, Bar>; first: number; last: number }

// by the actor's event array: live it grows in place and the lane goes on from where it was; a
// time-travel fold makes new arrays, read anew
const lanesByEvents = new WeakMap<readonly ActorEvent[], Lane>();

function laneOf(events: readonly ActorEvent[]): Lane {
  let lane = lanesByEvents.get(events);
  if (!lane || lane.folded > events.length) {
    lane = { folded: 0, bars: [], marks: [], open: new Map(), first: Infinity, last: -Infinity };
    lanesByEvents.set(events, lane);
  }
  for (; lane.folded < events.length; lane.folded++) {
    const e = events[lane.folded]!;
    const t = Date.parse(e.at);
    if (t < lane.first) lane.first = t;
    if (t > lane.last) lane.last = t;
    const failure = failureOf(e);
    for (const k of closes(e)) {
      const b = lane.open.get(k);
      if (b) {
        b.to = t;
        if (failure !== null) b.failed = true;
        lane.open.delete(k);
      }
    }
    const kind = OPENS[e.type];
    if (kind) {
      // a compaction's summary is a model attempt of the step, but not the one that answers it
      const summary = e.type === 'attempt/start' && e.data.kind === 'compaction';
      const label = e.type === 'tool/call' ? e.data.name : e.type === 'step/start' ? `step ${e.data.index}`
        : e.type === 'attempt/start' ? `${summary ? 'summary (compaction) ' : ''}attempt ${e.data.index}` : e.type;
      const b: Bar = summary ? { kind, label, from: t, to: null, summary } : { kind, label, from: t, to: null };
      lane.open.set(keyOf(kind, e), b);
      lane.bars.push(b);
    }
    if (e.type === 'actor/killed') lane.marks.push({ kind: 'killed', at: t, label: 'killed' });
    if (e.type === 'actor/rehydrated') lane.marks.push({ kind: 'rehydrated', at: t, label: 'recovered on a new incarnation' });
    if (failure !== null) lane.marks.push({ kind: 'failed', at: t, label: failure });
    const compaction = compactionMark(e, t);
    if (compaction !== null) lane.marks.push(compaction);
  }
  return lane;
}

const NO_EVENTS: readonly ActorEvent[] = [];
const LANE_ROW = 12;
const LABEL_W = 120;
/** The drawing's width before the panel was measured. */
const DEFAULT_WIDTH = 760;
const LANE_H = ROWS.length * LANE_ROW + 8;
const AXIS_H = 20;
/** The lanes' window: taller trees scroll in it, and only the lanes in view (and a few either side) are drawn. */
const VIEW_H = 480;
const OVERSCAN = 3;

/** The axis's length for a span: a step of a fine 1-2-5 scale at or above it, so the axis is not redrawn on every event. */
function axisSpan(span: number): number {
  const p = 10 ** Math.floor(Math.log10(span));
  for (const m of [1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= span) return m * p;
  return 10 * p;
}

interface LaneProps {
  row: TreeRow;
  lane: Lane;
  /** How many of its actor's events the lane holds: it grows in place, this says it moved. */
  folded: number;
  y0: number;
  t0: number;
  /** The axis's end (past the latest event: see `axisSpan`). */
  end: number;
  /** The latest event shown: where a bar still open ends. */
  latest: number;
  width: number;
}

/** `x` of a moment on a drawing `width` wide whose axis runs from `t0` to `end`. */
function scale(t0: number, end: number, width: number): (t: number) => number {
  return (t) => LABEL_W + ((t - t0) / (end - t0)) * (width - LABEL_W - 6);
}

/** The axis's tick step for a span: a 1-2-5 step giving about 6 ticks. */
function tickStep(span: number): number {
  const raw = span / 6;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function tickLabel(ms: number, step: number): string {
  if (step < 1000) return `+${Math.round(ms)} ms`;
  if (ms < 60_000 || step < 60_000) return `+${+(ms / 1000).toFixed(step < 1000 ? 1 : 0)} s`;
  return `+${+(ms / 60_000).toFixed(step < 60_000 ? 1 : 0)} min`;
}

/** The time axis: ticks from the first event, labelled by the time since it. */
function Axis({ t0, end, width }: { t0: number; end: number; width: number }) {
  const x = scale(t0, end, width);
  const step = tickStep(end - t0);
  const ticks: number[] = [];
  for (let t = 0; t0 + t <= end; t += step) ticks.push(t);
  return (
    <svg class="axis" width={width} height={AXIS_H} data-testid="timeline-axis">
      <line class="axis-line" x1={LABEL_W} x2={width - 6} y1={AXIS_H - 1} y2={AXIS_H - 1} />
      {ticks.map((t) => (
        <g key={t} class="tick">
          <line x1={x(t0 + t)} x2={x(t0 + t)} y1={AXIS_H - 5} y2={AXIS_H - 1} />
          {/* the last label ends at the axis's end rather than past the panel */}
          <text x={x(t0 + t)} y={AXIS_H - 7} class="tick-label" text-anchor={x(t0 + t) > width - 40 ? 'end' : 'middle'}>{tickLabel(t, step)}</text>
        </g>
      ))}
    </svg>
  );
}

/** The panel's inner width, followed as the window resizes. */
function useWidth(): [(el: HTMLDivElement | null) => void, number] {
  const [width, setWidth] = useState(DEFAULT_WIDTH);
  // one observer and one ref callback for the component's life: a new callback each render
  // would make Preact detach and attach it, and the observer report, on every render
  const observer = useRef<ResizeObserver | null>(null);
  const ref = useRef((el: HTMLDivElement | null): void => {
    observer.current?.disconnect();
    if (el === null) return;
    observer.current = new ResizeObserver((entries) => {
      // the scroll bar's room is left: the lanes scroll up and down, never sideways
      const w = Math.floor(entries[0]!.contentRect.width) - 14;
      if (w > 200) setWidth((old) => (Math.abs(old - w) >= 4 ? w : old));
    });
    observer.current.observe(el);
  });
  useEffect(() => () => observer.current?.disconnect(), []);
  return [ref.current, width];
}

const LaneView = memo(function LaneView({ row, lane: l, y0, t0, end, latest, width }: LaneProps) {
  const x = scale(t0, end, width);
  return (
    <g class="lane" data-actor={row.id}>
      <rect class="lane-bg" x={0} y={y0} width={width} height={LANE_H - 2} />
      <text class="lane-label" x={4 + row.depth * 10} y={y0 + 14}>{row.name.length > 16 ? `${row.name.slice(0, 15)}…` : row.name}</text>
      {l.bars.map((b, j) => {
        const bx = x(b.from);
        const w = Math.max(3, x(b.to ?? latest) - bx);
        return (
          <rect key={j} class={`bar bar-${b.kind}${b.summary ? ' bar-summary' : ''}${b.to === null ? ' open' : ''}${b.failed ? ' failed' : ''}`} data-kind={b.summary ? 'summary' : b.kind} data-from={b.from} data-to={b.to ?? ''} x={bx} y={y0 + 4 + ROWS.indexOf(b.kind) * LANE_ROW} width={w} height={LANE_ROW - 3}>
            <title>{`${b.label}: ${b.to === null ? 'open' : `${b.to - b.from} ms`}${b.failed ? ' · failed' : ''}`}</title>
          </rect>
        );
      })}
      {l.marks.map((m, j) => (
        <g key={`m${j}`} class={`mark mark-${m.kind}`} data-mark={m.kind}>
          {m.kind === 'failed'
            ? <path d={`M ${x(m.at)} ${y0 + 1} l 5 7 l -5 7 l -5 -7 z`} />
            : m.kind === 'compaction-rejected'
              ? <path d={`M ${x(m.at) - 4} ${y0 + 1} l 8 8 m 0 -8 l -8 8`} />
              : <line x1={x(m.at)} x2={x(m.at)} y1={y0} y2={y0 + LANE_H - 2} />}
          <title>{m.label}</title>
        </g>
      ))}
    </g>
  );
}, (a, b) => a.lane === b.lane && a.folded === b.folded && a.y0 === b.y0 && a.t0 === b.t0 && a.end === b.end && a.width === b.width &&
  a.row.id === b.row.id && a.row.name === b.row.name && a.row.depth === b.row.depth && (a.latest === b.latest || b.lane.open.size === 0));

/** The timeline of the tree's actors at the position shown, its jobs in a lane of their own below; `onSelect` selects a job clicked. */
export function Timeline({ rows: all, folded, selected = null, onSelect }: { rows: TreeRow[]; folded: Map<string, ActorState>; selected?: string | null; onSelect?: (id: string) => void }) {
  const rows = all.filter((r) => r.kind !== 'job');
  const jobs = all.filter((r) => r.kind === 'job').map((r) => jobBarOf(r, folded.get(r.id))).filter((b): b is JobBar => b !== null);
  const [scrollTop, setScrollTop] = useState(0);
  const [measure, width] = useWidth();
  let t0 = Infinity;
  let t1 = -Infinity;
  for (const a of folded.values()) {
    if (a.events.length === 0) continue;
    const l = laneOf(a.events);
    if (l.first < t0) t0 = l.first;
    if (l.last > t1) t1 = l.last;
  }
  if (t0 === Infinity) return <section class="timeline" aria-label="timeline"><h2>Timeline</h2><div ref={measure}><p class="muted">no events yet</p></div></section>;
  t1 = Math.max(t1, t0 + 1);
  const end = t0 + axisSpan(t1 - t0);
  const height = rows.length * LANE_H + 4;
  // a tree of a thousand actors is a thousand lanes: those out of view are not drawn at all
  const from = Math.max(0, Math.floor(scrollTop / LANE_H) - OVERSCAN);
  const to = Math.min(rows.length, Math.ceil((scrollTop + VIEW_H) / LANE_H) + OVERSCAN);
  const shown = rows.slice(from, to);
  return (
    <section class="timeline" aria-label="timeline">
      <h2>Timeline <span class="count">{durationText(t1 - t0)} from {timeText(new Date(t0).toISOString())}</span></h2>
      <ul class="legend" data-testid="timeline-legend">
        {LEGEND.map((l) => <li key={l.cls}><span class={`swatch ${l.cls}`} />{l.label}</li>)}
        {jobs.length > 0 && JOB_LEGEND.map((l) => <li key={l.cls}><span class={`swatch ${l.cls}`} />{l.label}</li>)}
      </ul>
      <div ref={measure}>
        <Axis t0={t0} end={end} width={width} />
        <div class="lanes" style={{ maxHeight: `${VIEW_H}px`, overflowY: 'auto', overflowX: 'hidden' }} onScroll={(e) => setScrollTop((e.currentTarget as HTMLDivElement).scrollTop)}>
          <svg width={width} height={height}>
            {shown.map((row, k) => {
              const lane = laneOf(folded.get(row.id)?.events ?? NO_EVENTS);
              return <LaneView key={row.id} row={row} lane={lane} folded={lane.folded} y0={(from + k) * LANE_H} t0={t0} end={end} latest={t1} width={width} />;
            })}
          </svg>
        </div>
        {jobs.length > 0 && (
          <svg class="jobs" width={width} height={jobLaneHeight(jobs.length)}>
            <JobLane bars={jobs} y0={0} x={scale(t0, end, width)} latest={t1} width={width} selected={selected} onSelect={onSelect} />
          </svg>
        )}
      </div>
    </section>
  );
}
