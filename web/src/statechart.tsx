import ELK, { type ElkExtendedEdge, type ElkNode } from 'elkjs/lib/elk.bundled.js';
import { memo } from 'preact/compat';
import { useEffect, useState } from 'preact/hooks';
import type { MachineView } from './active-states.js';

// A statechart drawn from a machine definition (`GET /v1/machines`), laid out by elkjs and drawn
// as SVG: compound states hold their children, each transition is an arrow named by the events
// that take it, root transitions leave from a `*` (any state), the active state and its parents
// are lit, and the transition the last event took flashes. Live, a host's report of a move (the
// inspection feed, `machines.subscribe`) flashes the state entered and the arrow taken for a
// second, also a move between two commits that the lit state never shows.

/** One state of a served definition. */
export interface StateDef {
  type?: string;
  initial?: string;
  on: Record<string, string[]>;
  states?: Record<string, StateDef>;
}

/** A served machine definition. */
export interface MachineDef {
  id: string;
  initial: string;
  on?: Record<string, string[]>;
  states: Record<string, StateDef>;
}

// runtime signals, never committed: the page is moved by the log alone
const SIGNALS = new Set(['recover', 'tick', 'abort']);
const CHAR_PX = 6.6;
const ANY = '*';
const START = '•';

interface Laid {
  graph: ElkNode;
  /** Absolute position of every node, by ID (edges are placed relative to their container). */
  at: Map<string, { x: number; y: number }>;
}

const elk = new ELK();
const layouts = new Map<string, Promise<Laid>>();

function edgesOf(def: MachineDef): Map<string, { from: string; to: string; events: string[] }> {
  const edges = new Map<string, { from: string; to: string; events: string[] }>();
  const add = (from: string, on: Record<string, string[]>): void => {
    for (const [event, targets] of Object.entries(on)) {
      if (SIGNALS.has(event)) continue;
      for (const to of targets) {
        const key = `${from}->${to}`;
        const e = edges.get(key) ?? { from, to, events: [] };
        e.events.push(event === 'always' ? '(always)' : event);
        edges.set(key, e);
      }
    }
  };
  if (def.on && Object.values(def.on).some((t) => t.length > 0)) add(ANY, def.on);
  const walk = (states: Record<string, StateDef>, prefix: string): void => {
    for (const [k, s] of Object.entries(states)) {
      add(prefix + k, s.on);
      if (s.states) walk(s.states, `${prefix}${k}.`);
    }
  };
  walk(def.states, '');
  edges.set(`${START}->${def.initial}`, { from: START, to: def.initial, events: [] });
  return edges;
}

function nodesOf(states: Record<string, StateDef>, prefix: string): ElkNode[] {
  return Object.entries(states).map(([k, s]) => {
    const id = prefix + k;
    if (s.states) {
      return {
        id,
        labels: [{ text: k, width: k.length * CHAR_PX, height: 14 }],
        layoutOptions: { 'elk.padding': '[top=26,left=10,bottom=10,right=10]', 'elk.nodeLabels.placement': 'INSIDE V_TOP H_LEFT' },
        children: nodesOf(s.states, `${id}.`),
      };
    }
    return { id, width: Math.max(64, k.length * CHAR_PX + 18), height: 30 };
  });
}

function layout(def: MachineDef): Promise<Laid> {
  let p = layouts.get(def.id);
  if (p) return p;
  const edges: ElkExtendedEdge[] = [...edgesOf(def).values()].map((e, i) => ({
    id: `e${i}`,
    sources: [e.from],
    targets: [e.to],
    labels: e.events.length ? [{ text: e.events.join(', '), width: e.events.join(', ').length * 5.6, height: 12 }] : [],
  }));
  const children = nodesOf(def.states, '');
  children.unshift({ id: START, width: 12, height: 12 });
  if (edges.some((e) => e.sources[0] === ANY)) children.push({ id: ANY, width: 24, height: 24 });
  const graph: ElkNode = {
    id: 'root',
    layoutOptions: {
      'elk.algorithm': 'layered',
      'elk.direction': 'DOWN',
      'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
      'elk.edgeLabels.inline': 'false',
      'elk.layered.spacing.nodeNodeBetweenLayers': '34',
      'elk.spacing.nodeNode': '22',
      'elk.spacing.edgeLabel': '2',
    },
    children,
    edges,
  };
  p = elk.layout(graph).then((g) => {
    const at = new Map<string, { x: number; y: number }>([['root', { x: 0, y: 0 }]]);
    const place = (n: ElkNode, ox: number, oy: number): void => {
      for (const c of n.children ?? []) {
        const x = ox + (c.x ?? 0);
        const y = oy + (c.y ?? 0);
        at.set(c.id, { x, y });
        place(c, x, y);
      }
    };
    place(g, 0, 0);
    return { graph: g, at };
  });
  layouts.set(def.id, p);
  return p;
}

/** A move a host reported live: the state entered, the one left (null: none was open), a counter that restarts the flash. */
export interface LiveFlash {
  to: string;
  from: string | null;
  n: number;
}

/** True when `path` is `state` or lies inside it. */
const within = (path: string | null, state: string): boolean => path !== null && (path === state || path.startsWith(`${state}.`));

function States({ nodes, view, at, flash }: { nodes: ElkNode[]; view: MachineView; at: Laid['at']; flash: LiveFlash | null }) {
  return (
    <>
      {nodes.map((n) => {
        const p = at.get(n.id)!;
        if (n.id === START) return <circle key={n.id} class="start" cx={p.x + 6} cy={p.y + 6} r={5} />;
        if (n.id === ANY) return <g key={n.id}><circle class="any" cx={p.x + 12} cy={p.y + 12} r={11} /><text class="any-label" x={p.x + 12} y={p.y + 16}>*</text></g>;
        const key = n.id.split('.').pop()!;
        const active = view.active === n.id;
        const lit = within(view.active, n.id);
        const compound = (n.children?.length ?? 0) > 0;
        const entered = flash !== null && flash.to === n.id;
        const cls = ['state', compound ? 'compound' : 'atomic', active ? 'active' : lit ? 'active-parent' : '', entered ? 'flash-state' : ''].join(' ');
        return (
          <g key={entered ? `${n.id}-${flash.n}` : n.id} class={cls} data-state={n.id} data-active={lit ? 'true' : 'false'}>
            <rect x={p.x} y={p.y} width={n.width} height={n.height} rx={compound ? 6 : 12} />
            {compound
              ? <text x={p.x + 10} y={p.y + 17} class="state-label">{key}</text>
              : <text x={p.x + (n.width ?? 0) / 2} y={p.y + 19} class="state-label centered">{key}</text>}
            {compound && <States nodes={n.children!} view={view} at={at} flash={flash} />}
          </g>
        );
      })}
    </>
  );
}

type ChartProps = { def: MachineDef; view: MachineView; flash?: LiveFlash | null };

/**
 * One machine's statechart with its active state lit, and (live) the move a host just reported
 * flashing; drawn again only when its definition, what it lights or what flashes changed.
 */
export const Statechart = memo(function Statechart({ def, view, flash = null }: ChartProps) {
  const [laid, setLaid] = useState<Laid | null>(null);
  useEffect(() => {
    let live = true;
    layout(def).then((l) => live && setLaid(l), () => {});
    return () => void (live = false);
  }, [def]);
  return (
    <figure class="chart" data-machine={view.machine} data-title={view.title} data-active-state={view.active ?? ''} data-flash={flash?.to ?? ''}>
      <figcaption>{view.title} <span class="now">{view.active ?? '—'}</span></figcaption>
      {laid === null ? <div class="laying">laying out…</div> : <Drawing laid={laid} view={view} flash={flash} />}
    </figure>
  );
}, (a: ChartProps, b: ChartProps) => a.def === b.def && a.view.machine === b.view.machine && a.view.title === b.view.title &&
  a.view.active === b.view.active && a.view.previous === b.view.previous && a.view.movedAt === b.view.movedAt && (a.flash ?? null) === (b.flash ?? null));

function Drawing({ laid, view, flash }: { laid: Laid; view: MachineView; flash: LiveFlash | null }) {
  const g = laid.graph;
  const defsId = `arrow-${view.machine}`;
  return (
    <svg width={(g.width ?? 0) + 8} height={(g.height ?? 0) + 8} viewBox={`-4 -4 ${(g.width ?? 0) + 8} ${(g.height ?? 0) + 8}`}>
      <defs>
        <marker id={defsId} viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
          <path d="M 0 0 L 10 5 L 0 10 z" class="arrow-head" />
        </marker>
      </defs>
      <States nodes={g.children ?? []} view={view} at={laid.at} flash={flash} />
      {(g.edges ?? []).map((e) => {
        const container = laid.at.get((e as { container?: string }).container ?? 'root') ?? { x: 0, y: 0 };
        const from = e.sources[0]!;
        const to = e.targets[0]!;
        // the transition the last event took: from the state it left (or a parent of it) to the one it entered
        const moved = view.previous !== null && view.active !== null && (within(view.previous, from) || from === ANY) && within(view.active, to);
        // the move a host reported: from the state it left (or any, or the start) into the one it entered
        const taken = flash !== null && within(flash.to, to) && (flash.from === null ? from === START : within(flash.from, from) || from === ANY);
        const cls = ['edge', moved ? 'flash' : '', taken ? 'flash-live' : ''].filter(Boolean).join(' ');
        const d = (e.sections ?? []).map((s) => {
          const pts = [s.startPoint, ...(s.bendPoints ?? []), s.endPoint];
          return pts.map((pt, i) => `${i === 0 ? 'M' : 'L'} ${pt.x + container.x} ${pt.y + container.y}`).join(' ');
        }).join(' ');
        return (
          <g key={taken ? `${e.id}-live-${flash!.n}` : moved ? `${e.id}-${view.movedAt}` : e.id} class={cls} data-from={from} data-to={to}>
            <path d={d} marker-end={`url(#${defsId})`} />
            {(e.labels ?? []).map((l, i) => (
              <text key={i} class="edge-label" x={(l.x ?? 0) + container.x} y={(l.y ?? 0) + container.y + 10}>{l.text}</text>
            ))}
          </g>
        );
      })}
    </svg>
  );
}
