import { memo } from 'preact/compat';
import { useState } from 'preact/hooks';
import type { ActorRow } from './api.js';
import { badge, statusOf, tokensOf, type ActorState } from './fold.js';
import { costText, tokensText } from './format.js';

// The actor tree: every actor under the root with its badge, tokens and cost, and the tree's sums;
// each row carries the statuses the page saw it in (`data-history`, and its tooltip).
// Live, the gateway's word on each status is shown (it knows of hosts dying); at an earlier
// position, the status the log folded to that position says. A big tree scrolls in its panel and
// draws only the rows in view (each row as high as the next): a thousand rows painted at every
// flush cost more than the page's scripts.

/** From how many rows the tree draws only those in view. */
const VIRTUAL_FROM = 200;
/** A row's height when only those in view are drawn (px), and the panel's. */
const ROW_H = 26;
const VIEW_H = 640;
/** Rows drawn above and below the view, so a scroll shows no gap before the next render. */
const OVERSCAN = 15;

/** One row of the tree as the page shows it. */
export interface TreeRow {
  id: string;
  name: string;
  /** `agent`, `subagent` or `job` (a job sits under its owner, drawn apart from the agents). */
  kind: string;
  parentId: string | null;
  depth: number;
  status: string;
  tokens: number;
  costUsd: number | null;
}

/** The badge of a gateway's row: its status, a wait named by what it waits for. */
export function badgeOf(r: ActorRow): string {
  return badge(r.status, r.waitingFor?.kind ?? null);
}

/** The rows of the tree: the gateway's actors and those the events name, parents before children. */
export function treeRows(rows: readonly ActorRow[], folded: Map<string, ActorState>, live: boolean): TreeRow[] {
  const byId = new Map<string, TreeRow>();
  for (const r of rows) {
    const status = badgeOf(r);
    byId.set(r.id, { id: r.id, name: r.name, kind: r.kind, parentId: r.parentId, depth: r.depth, status, tokens: r.tokens, costUsd: r.costUsd });
  }
  for (const a of folded.values()) {
    const known = byId.get(a.actorId);
    const row: TreeRow = known ?? (a.job
      ? { id: a.actorId, name: a.job.name, kind: 'job', parentId: a.job.ownerId, depth: (byId.get(a.job.ownerId)?.depth ?? 0) + 1, status: 'pending', tokens: 0, costUsd: 0 }
      : {
        id: a.actorId, name: a.spawnedAs?.name ?? a.projection.lastSettings?.agentName ?? a.actorId, kind: a.spawnedAs ? 'subagent' : 'agent',
        parentId: a.spawnedAs?.parentId ?? null, depth: a.spawnedAs?.depth ?? 0, status: 'idle', tokens: 0, costUsd: 0,
      });
    if (a.job) {
      // a job's phase is its log's word, live too: the gateway's status of it is the same phase in an agent's words
      row.kind = 'job';
      row.status = a.job.phase;
    } else if (!live || !known) {
      row.status = statusOf(a);
      row.tokens = tokensOf(a);
      row.costUsd = a.costUsd;
    }
    byId.set(a.actorId, row);
  }
  // at an earlier position, an actor not spawned yet is not shown
  if (!live) for (const id of [...byId.keys()]) if (!folded.has(id)) byId.delete(id);
  // children by parent, in the order met: one pass, not a scan of every row per row
  const children = new Map<string, TreeRow[]>();
  for (const r of byId.values()) {
    if (r.parentId === null) continue;
    const list = children.get(r.parentId);
    if (list) list.push(r);
    else children.set(r.parentId, [r]);
  }
  const out: TreeRow[] = [];
  const seen = new Set<string>();
  const visit = (r: TreeRow): void => {
    if (seen.has(r.id)) return;
    seen.add(r.id);
    out.push(r);
    for (const c of children.get(r.id) ?? []) visit(c);
  };
  for (const r of byId.values()) if (r.parentId === null || !byId.has(r.parentId)) visit(r);
  return out;
}


/** One actor's row: drawn again only when what it shows changed (a tree of a thousand mostly does not, event to event). */
const TreeItem = memo(function TreeItem({ r, selected, onSelect, history }: { r: TreeRow; selected: boolean; onSelect: (id: string) => void; history: string | null }) {
  return (
    <li class={`actor${r.kind === 'job' ? ' job' : ''}${selected ? ' selected' : ''}`} data-actor={r.id} data-name={r.name} data-kind={r.kind} data-status={r.status}
      data-history={history ?? ''} title={history !== null ? `seen: ${history.split(' ').join(' → ')}` : undefined}
      style={{ paddingLeft: `${r.depth * 16 + 4}px` }} onClick={() => onSelect(r.id)}>
      {r.kind === 'job' && <span class="kind-tag" title="a background job of its owner">job</span>}
      <span class="name">{r.name}</span>
      <span class={`badge status-${r.status}`}>{r.status.replace('_', ' ')}</span>
      <span class="usage">{tokensText(r.tokens)} · {costText(r.costUsd)}</span>
    </li>
  );
}, (a, b) => a.selected === b.selected && a.onSelect === b.onSelect && a.history === b.history && a.r.id === b.r.id && a.r.name === b.r.name && a.r.kind === b.r.kind && a.r.status === b.r.status &&
  a.r.depth === b.r.depth && a.r.tokens === b.r.tokens && a.r.costUsd === b.r.costUsd);

/** The tree, one row per actor; clicking one selects it. */
export function Tree({ rows, selected, onSelect, historyOf }: { rows: TreeRow[]; selected: string | null; onSelect: (id: string) => void; historyOf?: (id: string) => readonly string[] }) {
  let tokens = 0;
  let cost: number | null = 0;
  // a job is a row of its owner's, not an actor of the tree's count
  let jobs = 0;
  for (const r of rows) {
    if (r.kind === 'job') jobs += 1;
    tokens += r.tokens;
    cost = cost === null || r.costUsd === null ? null : cost + r.costUsd;
  }
  const [scrollTop, setScrollTop] = useState(0);
  const virtual = rows.length > VIRTUAL_FROM;
  const from = virtual ? Math.max(0, Math.floor(scrollTop / ROW_H) - OVERSCAN) : 0;
  const to = virtual ? Math.min(rows.length, Math.ceil((scrollTop + VIEW_H) / ROW_H) + OVERSCAN) : rows.length;
  return (
    <section class="tree" aria-label="actor tree">
      <h2>Actors</h2>
      <ul class={virtual ? 'virtual' : undefined} style={virtual ? { maxHeight: `${VIEW_H}px` } : undefined}
        onScroll={virtual ? (e) => setScrollTop((e.currentTarget as HTMLUListElement).scrollTop) : undefined}>
        {from > 0 && <li class="spacer" aria-hidden="true" style={{ height: `${from * ROW_H}px` }} />}
        {rows.slice(from, to).map((r) => <TreeItem key={r.id} r={r} selected={r.id === selected} onSelect={onSelect} history={historyOf?.(r.id).join(' ') ?? null} />)}
        {to < rows.length && <li class="spacer" aria-hidden="true" style={{ height: `${(rows.length - to) * ROW_H}px` }} />}
      </ul>
      <div class="tree-total" data-testid="tree-total">tree: {rows.length - jobs} actors{jobs > 0 ? ` · ${jobs} job${jobs === 1 ? '' : 's'}` : ''} · {tokensText(tokens)} · {costText(cost)}</div>
    </section>
  );
}
