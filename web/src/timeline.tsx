import type { ActorEvent } from '../../src/protocol/events.js';
import type { ActorState } from './fold.js';
import type { TreeRow } from './tree.js';

// A timeline like Temporal's: per actor (children as nested lanes), its turns, steps, attempts,
// tool calls and waits as bars over time; kills and recoveries as marks. A bar still open runs
// to the latest event shown. Each bar carries its times (`data-from`, `data-to`: ms since the
// epoch, empty while open) for whoever reads the page, not only its eyes.

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

function barsOf(events: readonly ActorEvent[]): { bars: Bar[]; marks: Mark[] } {
  const open = new Map<string, Bar>();
  const bars: Bar[] = [];
  const marks: Mark[] = [];
  for (const e of events) {
    const t = Date.parse(e.at);
    for (const k of closes(e)) {
      const b = open.get(k);
      if (b) { b.to = t; open.delete(k); }
    }
    const kind = OPENS[e.type];
    if (kind) {
      const label = e.type === 'tool/call' ? e.data.name : e.type === 'step/start' ? `step ${e.data.index}` : e.type === 'attempt/start' ? `attempt ${e.data.index}` : e.type;
      const b: Bar = { kind, label, from: t, to: null };
      open.set(keyOf(kind, e), b);
      bars.push(b);
    }
    if (e.type === 'actor/killed') marks.push({ kind: 'killed', at: t });
    if (e.type === 'actor/rehydrated') marks.push({ kind: 'rehydrated', at: t });
  }
  return { bars, marks };
}

const LANE_ROW = 12;
const LABEL_W = 110;
const WIDTH = 760;

/** The timeline of the tree's actors at the position shown. */
export function Timeline({ rows, folded }: { rows: TreeRow[]; folded: Map<string, ActorState> }) {
  const lanes = rows.map((r) => ({ row: r, ...barsOf(folded.get(r.id)?.events ?? []) }));
  const times = [...folded.values()].flatMap((a) => a.events.map((e) => Date.parse(e.at)));
  if (times.length === 0) return <section class="timeline"><h2>Timeline</h2><p>no events yet</p></section>;
  const t0 = Math.min(...times);
  const t1 = Math.max(...times, t0 + 1);
  const x = (t: number): number => LABEL_W + ((t - t0) / (t1 - t0)) * (WIDTH - LABEL_W - 6);
  const laneH = ROWS.length * LANE_ROW + 8;
  return (
    <section class="timeline" aria-label="timeline">
      <h2>Timeline <span class="count">{Math.round(t1 - t0)} ms</span></h2>
      <svg width={WIDTH} height={lanes.length * laneH + 4}>
        {lanes.map((l, i) => {
          const y0 = i * laneH;
          return (
            <g key={l.row.id} class="lane" data-actor={l.row.id}>
              <rect class="lane-bg" x={0} y={y0} width={WIDTH} height={laneH - 2} />
              <text class="lane-label" x={4 + l.row.depth * 10} y={y0 + 14}>{l.row.name}</text>
              {l.bars.map((b, j) => {
                const bx = x(b.from);
                const w = Math.max(3, x(b.to ?? t1) - bx);
                return (
                  <rect key={j} class={`bar bar-${b.kind}${b.to === null ? ' open' : ''}`} data-kind={b.kind} data-from={b.from} data-to={b.to ?? ''} x={bx} y={y0 + 4 + ROWS.indexOf(b.kind) * LANE_ROW} width={w} height={LANE_ROW - 3}>
                    <title>{`${b.label}: ${b.to === null ? 'open' : `${b.to - b.from} ms`}`}</title>
                  </rect>
                );
              })}
              {l.marks.map((m, j) => (
                <g key={`m${j}`} class={`mark mark-${m.kind}`} data-mark={m.kind}>
                  <line x1={x(m.at)} x2={x(m.at)} y1={y0} y2={y0 + laneH - 2} />
                  <title>{m.kind}</title>
                </g>
              ))}
            </g>
          );
        })}
      </svg>
    </section>
  );
}
