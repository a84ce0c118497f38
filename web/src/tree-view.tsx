import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { machinesOf } from './active-states.js';
import { Actions } from './actions.js';
import { actorFacts, followEvents, followMachines, getJson, type ActorRow, type ActorsResponse, type Rpc, type StreamEvent } from './api.js';
import { EventList } from './event-list.js';
import { foldTree, pendingInTree, TreeFolder } from './fold.js';
import { JOB_ID_PREFIX } from './job-api.js';
import { JobPanel } from './job-panel.js';
import { NeedsYou } from './needs-you.js';
import { RunsList } from './runs.js';
import { Statechart, type LiveFlash, type MachineDef } from './statechart.js';
import { StatusHistory } from './status-history.js';
import { ActorSummary, type ActorFacts } from './summary.js';
import { Timeline } from './timeline.js';
import { badgeOf, Tree, treeRows } from './tree.js';
import type { PageLocation } from './url.js';

// One tree, as the page shows it with `?actor=`: the tree on the left; for the selected actor what
// needs a person in the tree, its summary, actions, timeline, events and statecharts; the
// time-travel slider on top. Everything shown at a position of the stream is folded from the
// events up to it; "live" is the last position. Live, the tree is asked of the gateway again every
// second even when no event comes: a host's death commits nothing, and only the gateway's read of
// the leases tells it. An `?actor=` the gateway does not know is said so, with every tree shown to
// pick from. Live, the selected actor's machines are also followed through `machines.subscribe`:
// each move a host reports flashes in its statechart for a second (what is lit stays the log's fold).

/** The least time between two reads of the tree's actors while events stream in. */
const REFRESH_MS = 1000;

/** Between two reads of the tree while live and no event comes. */
const TREE_REFRESH_MS = 1000;

/** Between two reads of the selected actor's holder and workspace. */
const FACTS_REFRESH_MS = 2000;

/** How long a reported move flashes. */
const FLASH_MS = 1_000;

/** The moves a host just reported, by machine key, for a second each; and how far the feed got (`data-feed`). */
function useLiveFlashes(rpc: Rpc, agentId: string | null, live: boolean): { flashes: Record<string, LiveFlash>; feed: 'off' | 'log' | 'host' } {
  const [flashes, setFlashes] = useState<Record<string, LiveFlash>>({});
  const [feed, setFeed] = useState<'off' | 'log' | 'host'>('off');
  useEffect(() => {
    // time travel shows the past: nothing a host says now belongs there
    if (agentId === null || !live) return;
    let last: Record<string, string> = {};
    let n = 0;
    const timers = new Set<ReturnType<typeof setTimeout>>();
    const stop = followMachines(rpc, agentId, (r) => {
      if (r.kind === 'transition') setFeed('host');
      else setFeed((f) => (f === 'host' ? f : 'log'));
      const before = last;
      last = r.active;
      // a state (the log's, or a host's when its watch began) is where to compare from, not a move
      if (r.kind === 'state' || r.eventType === null) return;
      const moved: Record<string, LiveFlash> = {};
      for (const [key, to] of Object.entries(r.active)) if (before[key] !== to) moved[key] = { to, from: before[key] ?? null, n: ++n };
      if (Object.keys(moved).length === 0) return;
      setFlashes((f) => ({ ...f, ...moved }));
      const t = setTimeout(() => {
        timers.delete(t);
        setFlashes((f) => {
          const kept = { ...f };
          for (const [key, m] of Object.entries(moved)) if (kept[key]?.n === m.n) delete kept[key];
          return kept;
        });
      }, FLASH_MS);
      timers.add(t);
    });
    return () => {
      stop();
      for (const t of timers) clearTimeout(t);
      setFlashes({});
      setFeed('off');
    };
  }, [agentId, live]);
  return { flashes, feed };
}

/** The gateway's word on the selected actor's holder and workspace, read again while live. */
function useFacts(actorId: string | null, live: boolean): ActorFacts | null {
  const [facts, setFacts] = useState<ActorFacts | null>(null);
  useEffect(() => {
    setFacts(null);
    if (actorId === null) return;
    let stopped = false;
    const read = (): void => void actorFacts(actorId).then((f) => !stopped && setFacts(f), () => {});
    read();
    if (!live) return () => void (stopped = true);
    const every = setInterval(read, FACTS_REFRESH_MS);
    return () => {
      stopped = true;
      clearInterval(every);
    };
  }, [actorId, live]);
  return facts;
}

interface TreeViewProps {
  rpc: Rpc;
  loc: PageLocation;
  go: (change: Partial<PageLocation>, push?: boolean) => void;
  useTitle: (waiting: number) => void;
}

/** The tree view of the page. */
export function TreeView({ rpc, loc, go, useTitle }: TreeViewProps) {
  // each render to its DOM commit is measured (`actorloop:render`): the page bench reads them
  const renderStart = performance.now();
  useLayoutEffect(() => void performance.measure('actorloop:render', { start: renderStart }));
  const [defs, setDefs] = useState<MachineDef[]>([]);
  const [actors, setActors] = useState<ActorRow[]>([]);
  const [faultsAllowed, setFaultsAllowed] = useState(false);
  const [stream, setStream] = useState<StreamEvent[]>([]);
  const [connected, setConnected] = useState(false);
  const [error, setError] = useState('');
  const [loaded, setLoaded] = useState(false);
  const [runsOpen, setRunsOpen] = useState(false);
  const [runsFilter, setRunsFilter] = useState({ status: '', q: '' });
  const selected = loc.actor;
  const cursor = loc.at;
  const buffer = useRef<StreamEvent[]>([]);
  // what each actor was seen doing, from the gateway's reads and the page's own fold
  const history = useRef(new StatusHistory());
  const noteFolded = (actorId: string, status: string, streamSeq: number): void => void history.current.note(actorId, status, { streamSeq, whole: false });
  // live, the tree's fold moves forward one event at a time; a past position is folded anew
  const liveFold = useRef(new TreeFolder(noteFolded));
  const asking = useRef(false);

  const refreshActors = (root: string | null = null): void => {
    // one read at a time: a slow gateway is not asked again before it answered
    if (asking.current) return;
    asking.current = true;
    getJson<ActorsResponse>(root === null ? '/v1/actors' : `/v1/actors?root=${encodeURIComponent(root)}`).then((r) => {
      for (const a of r.actors) history.current.note(a.id, badgeOf(a), a.streamSeq === undefined ? undefined : { streamSeq: a.streamSeq, whole: true });
      setActors(r.actors);
      setLoaded(true);
      setFaultsAllowed(r.faultsAllowed === true || r.allowFaults === true);
    }, (e: Error) => setError(e.message)).finally(() => (asking.current = false));
  };

  useEffect(() => {
    getJson<{ machines: MachineDef[] }>('/v1/machines').then((r) => setDefs(r.machines), (e: Error) => setError(e.message));
    refreshActors();
  }, []);

  const rootRef = useRef<string | null>(null);
  const live = cursor === null;
  // live, the tree is read again even when nothing is committed (a death commits nothing): the
  // followed tree alone, or every tree while none is followed
  useEffect(() => {
    if (!live) return;
    const every = setInterval(() => refreshActors(rootRef.current), TREE_REFRESH_MS);
    return () => clearInterval(every);
  }, [live]);

  // an ID the gateway's directory does not hold (once it answered): no tree to follow
  const unknown = loaded && selected !== null && !actors.some((a) => a.id === selected);
  const rootId = useMemo(
    // none before the gateway answered: an unknown ID must not open a stream the gateway refuses
    () => (selected === null || !loaded || unknown ? null : (actors.find((a) => a.id === selected)?.rootId ?? selected)),
    [selected, actors, loaded, unknown],
  );

  rootRef.current = rootId;
  useEffect(() => {
    if (rootId === null) return;
    setStream([]);
    buffer.current = [];
    liveFold.current = new TreeFolder(noteFolded);
    let timer: ReturnType<typeof setTimeout> | null = null;
    let refreshTimer: ReturnType<typeof setTimeout> | null = null;
    let refreshedAt = 0;
    // the tree's actors again after a burst, its tree alone and at most once a second: a big tree
    // under a steady stream would otherwise be read whole every flush
    const refreshSoon = (): void => {
      if (refreshTimer) return;
      refreshTimer = setTimeout(() => {
        refreshTimer = null;
        refreshedAt = Date.now();
        refreshActors(rootId);
      }, Math.max(0, refreshedAt + REFRESH_MS - Date.now()));
    };
    // events arrive in bursts: render once a burst settles (60 ms), and read the tree's actors again
    const flush = (): void => {
      timer = null;
      const batch = buffer.current;
      buffer.current = [];
      setStream((s) => [...s, ...batch]);
      refreshSoon();
    };
    const stop = followEvents(rootId, (e) => {
      buffer.current.push(e);
      timer ??= setTimeout(flush, 60);
    }, setConnected);
    return () => {
      stop();
      if (timer) clearTimeout(timer);
      if (refreshTimer) clearTimeout(refreshTimer);
    };
  }, [rootId]);

  // a shared `at=` past what has streamed so far shows the stream as it comes, up to it
  const position = live ? stream.length : Math.min(cursor, stream.length);
  // at a past position, the statuses seen are those the log folded to up to it
  const { folded, pastHistory } = useMemo(() => {
    if (live) return { folded: new Map(liveFold.current.advance(stream, stream.length).actors), pastHistory: null };
    const h = new StatusHistory();
    return { folded: foldTree(stream, position, (id, status, streamSeq) => void h.note(id, status, { streamSeq, whole: false })), pastHistory: h };
  }, [stream, position, live]);
  const historyOf = (id: string): readonly string[] => (pastHistory ?? history.current).of(id);
  const rows = treeRows(actors.filter((a) => rootId === null || a.rootId === rootId), folded, live);
  const names = useMemo(() => new Map(rows.map((r) => [r.id, r.name])), [rows.length, rows.map((r) => r.name).join('\u0000')]);
  const actor = selected === null ? undefined : folded.get(selected);
  const row = rows.find((r) => r.id === selected);
  const gatewayRow = actors.find((a) => a.id === selected);
  // a job is an actor of its own log, but no agent: it has no agent machines, summary or actions
  // (its ID says so before anything is read: a job's reads are not an agent's)
  const isJob = selected?.startsWith(JOB_ID_PREFIX) === true || actor?.job !== undefined || gatewayRow?.kind === 'job' || row?.kind === 'job';
  // live, an actor's state is the same object as it grows: its event count says when its charts moved
  const views = useMemo(() => (actor && !isJob ? machinesOf(actor) : []), [actor, actor?.events.length, isJob]);
  const shownEvents = useMemo(() => stream.slice(0, position).filter((e) => e.event.actor === selected), [stream, position, selected]);
  const pending = useMemo(() => (rootId === null ? [] : pendingInTree(folded, (id) => names.get(id) ?? id, rootId)), [folded, names, rootId]);
  const at = stream[position - 1];
  const { flashes, feed } = useLiveFlashes(rpc, isJob ? null : selected, live);
  const facts = useFacts(isJob ? null : selected, live);
  useTitle(pending.length);
  // one function for the view's life: the tree's rows are memoized on it
  const select = useRef((id: string): void => go({ actor: id }, true)).current;
  const parentId = row?.parentId ?? gatewayRow?.parentId ?? null;

  return (
    <div class="page">
      <header>
        <h1><a href="?" onClick={(e) => { e.preventDefault(); go({ actor: null, at: null }, true); }}>actorloop</a></h1>
        <button class="runs-toggle" aria-expanded={runsOpen} onClick={() => setRunsOpen(!runsOpen)}>Runs</button>
        <span class={connected && rootId !== null ? 'conn on' : 'conn off'}>{rootId === null ? 'no tree followed' : connected ? 'live stream' : 'disconnected'}</span>
        {pending.length > 0 && <span class="needs-count" data-testid="needs-count">{pending.length} need{pending.length === 1 ? 's' : ''} you</span>}
        <div class="travel">
          <input type="range" aria-label="time travel" min={0} max={stream.length} value={position}
            onInput={(e) => {
              const v = Number((e.target as HTMLInputElement).value);
              go({ at: v >= stream.length ? null : v });
            }} />
          <span class="position" data-testid="position">{live ? 'live' : `at ${position}/${stream.length}`}{at ? ` · ${at.event.type} · ${at.event.at.slice(11, 23)}` : ''}</span>
          <button class="live" disabled={live} onClick={() => go({ at: null })}>Live</button>
        </div>
        {error && <span class="error">{error}</span>}
      </header>
      {runsOpen && (
        <div class="runs-panel" data-testid="runs-panel">
          <RunsList status={runsFilter.status} q={runsFilter.q} current={rootId} onFilter={(status, q) => setRunsFilter({ status, q })}
            onOpen={(id) => { setRunsOpen(false); go({ actor: id, at: null }, true); }} />
        </div>
      )}
      <main class="tree-view">
        <Tree rows={rows} selected={selected} onSelect={select} historyOf={historyOf} />
        <div class="detail">
          {unknown && <p class="notice unknown-actor" data-testid="unknown-actor">no actor {selected} here; pick one from the tree, or open the runs list</p>}
          {selected && !unknown && loaded && !actor && !live && (
            <p class="notice" data-testid="not-yet">{row?.name ?? selected} has no event yet at this position: move on in time, or press Live</p>
          )}
          {rootId !== null && <NeedsYou items={pending} rpc={rpc} live={live} scope="in this tree" />}
          {actor?.job && selected && (
            <JobPanel actor={actor} rpc={rpc} live={live} owner={parentId === null ? null : { id: parentId, name: names.get(parentId) ?? parentId }} onSelect={select} />
          )}
          {actor && selected && !isJob && (
            <ActorSummary actor={actor} name={row?.name ?? selected} kind={gatewayRow?.kind ?? (parentId === null ? 'agent' : 'subagent')} status={row?.status ?? 'idle'}
              parent={parentId === null ? null : { id: parentId, name: names.get(parentId) ?? parentId }} facts={facts} onSelect={select} />
          )}
          {selected && !unknown && historyOf(selected).length > 0 && (
            <div class="status-history" data-testid="status-history">status seen{live ? '' : ' up to here'}: {historyOf(selected).join(' → ')}</div>
          )}
          {actor && selected && !isJob && <Actions agentId={selected} name={row?.name ?? selected} projection={actor.projection} rpc={rpc} live={live} faultsAllowed={faultsAllowed} />}
          <Timeline rows={rows} folded={folded} selected={selected} onSelect={select} />
          <EventList events={shownEvents} names={names} />
          {!isJob && (
            <section class="charts" aria-label="statecharts" data-feed={feed}>
              <h2>Statecharts</h2>
              <div class="chart-grid">
                {views.map((v) => {
                  const def = defs.find((d) => d.id === v.machine);
                  return def ? <Statechart key={`${v.machine}:${v.title}`} def={def} view={v} flash={live ? (flashes[v.key] ?? null) : null} /> : null;
                })}
              </div>
            </section>
          )}
        </div>
      </main>
    </div>
  );
}
