import { memo } from 'preact/compat';
import { useState } from 'preact/hooks';
import type { ActorEvent } from '../../src/protocol/events.js';
import type { ActorState } from './fold.js';
import type { TreeRow } from './tree.js';

// A timeline like Temporal's: per actor (children as nested lanes), its turns, steps, attempts,
// tool calls and waits as bars over time; kills and recoveries as marks. A bar still open runs
// to the latest event shown. Each actor's bars are folded once per event (kept by its event
// array), only the lanes in view are drawn, and the axis runs to a step past the latest event, so
// a new event redraws the lanes whose bars it moved, not every bar of the tree.
// Each bar carries its times (`data-from`, `data-to`: ms since the epoch, empty while open) for
// whoever reads the page, not only its eyes.

type Kind = 'turn' | 'step' | 'attempt' | 'tool' | 'wait';
interface Bar { kind: Kind; label: string; from: number; to: number | null }
interface Mark { kind: 'killed' | 'rehydrated'; at: number }

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
    for (const k of closes(e)) {
      const b = lane.open.get(k);
      if (b) { b.to = t; lane.open.delete(k); }
    }
    const kind = OPENS[e.type];
    if (kind) {
      const label = e.type === 'tool/call' ? e.data.name : e.type === 'step/start' ? `step ${e.data.index}` : e.type === 'attempt/start' ? `attempt ${e.data.index}` : e.type;
      const b: Bar = { kind, label, from: t, to: null };
      lane.open.set(keyOf(kind, e), b);
      lane.bars.push(b);
    }
    if (e.type === 'actor/killed') lane.marks.push({ kind: 'killed', at: t });
    if (e.type === 'actor/rehydrated') lane.marks.push({ kind: 'rehydrated', at: t });
  }
  return lane;
}

const NO_EVENTS: readonly ActorEvent[] = [];
const LANE_ROW = 12;
const LABEL_W = 110;
const WIDTH = 760;
const LANE_H = ROWS.length * LANE_ROW + 8;
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
}

/** One actor's lane; drawn again only when its events, its place or the axis changed, or the latest event moved one of its open bars. */
const LaneView = memo(function LaneView({ row, lane: l, y0, t0, end, latest }: LaneProps) {
  const x = (t: number): number => LABEL_W + ((t - t0) / (end - t0)) * (WIDTH - LABEL_W - 6);
  return (
    <g class="lane" data-actor={row.id}>
      <rect class="lane-bg" x={0} y={y0} width={WIDTH} height={LANE_H - 2} />
      <text class="lane-label" x={4 + row.depth * 10} y={y0 + 14}>{row.name}</text>
      {l.bars.map((b, j) => {
        const bx = x(b.from);
        const w = Math.max(3, x(b.to ?? latest) - bx);
        return (
          <rect key={j} class={`bar bar-${b.kind}${b.to === null ? ' open' : ''}`} data-kind={b.kind} data-from={b.from} data-to={b.to ?? ''} x={bx} y={y0 + 4 + ROWS.indexOf(b.kind) * LANE_ROW} width={w} height={LANE_ROW - 3}>
            <title>{`${b.label}: ${b.to === null ? 'open' : `${b.to - b.from} ms`}`}</title>
          </rect>
        );
      })}
      {l.marks.map((m, j) => (
        <g key={`m${j}`} class={`mark mark-${m.kind}`} data-mark={m.kind}>
          <line x1={x(m.at)} x2={x(m.at)} y1={y0} y2={y0 + LANE_H - 2} />
          <title>{m.kind}</title>
        </g>
      ))}
    </g>
  );
}, (a, b) => a.lane === b.lane && a.folded === b.folded && a.y0 === b.y0 && a.t0 === b.t0 && a.end === b.end &&
  a.row.id === b.row.id && a.row.name === b.row.name && a.row.depth === b.row.depth && (a.latest === b.latest || b.lane.open.size === 0));

/** The timeline of the tree's actors at the position shown. */
export function Timeline({ rows, folded }: { rows: TreeRow[]; folded: Map<string, ActorState> }) {
  const [scrollTop, setScrollTop] = useState(0);
  let t0 = Infinity;
  let t1 = -Infinity;
  for (const a of folded.values()) {
    if (a.events.length === 0) continue;
    const l = laneOf(a.events);
    if (l.first < t0) t0 = l.first;
    if (l.last > t1) t1 = l.last;
  }
  if (t0 === Infinity) return <section class="timeline"><h2>Timeline</h2><p>no events yet</p></section>;
  t1 = Math.max(t1, t0 + 1);
  const end = t0 + axisSpan(t1 - t0);
  const height = rows.length * LANE_H + 4;
  // a tree of a thousand actors is a thousand lanes: those out of view are not drawn at all
  const from = Math.max(0, Math.floor(scrollTop / LANE_H) - OVERSCAN);
  const to = Math.min(rows.length, Math.ceil((scrollTop + VIEW_H) / LANE_H) + OVERSCAN);
  const shown = rows.slice(from, to);
  return (
    <section class="timeline" aria-label="timeline">
      <h2>Timeline <span class="count">{Math.round(t1 - t0)} ms</span></h2>
      <div class="lanes" style={{ maxHeight: `${VIEW_H}px`, overflowY: 'auto' }} onScroll={(e) => setScrollTop((e.currentTarget as HTMLDivElement).scrollTop)}>
        <svg width={WIDTH} height={height}>
          {shown.map((row, k) => {
            const lane = laneOf(folded.get(row.id)?.events ?? NO_EVENTS);
            return <LaneView key={row.id} row={row} lane={lane} folded={lane.folded} y0={(from + k) * LANE_H} t0={t0} end={end} latest={t1} />;
          })}
        </svg>
      </div>
    </section>
  );
}
