import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { machinesOf } from './active-states.js';
import { Actions } from './actions.js';
import { followEvents, followMachines, getJson, Rpc, type ActorRow, type ActorsResponse, type StreamEvent } from './api.js';
import { EventList } from './event-list.js';
import { foldTree, TreeFolder } from './fold.js';
import { Statechart, type LiveFlash, type MachineDef } from './statechart.js';
import { Timeline } from './timeline.js';
import { StatusHistory } from './status-history.js';
import { badgeOf, Tree, treeRows } from './tree.js';

// The page: the tree on the left; for the selected actor its statecharts, the actions, the
// timeline and the events; the time-travel slider on top. Everything shown at a position of the
// stream is folded from the events up to it; "live" is the last position. Live, the tree is asked
// of the gateway again every second even when no event comes: a host's death commits nothing, and
// only the gateway's read of the leases tells it. An `?actor=` the gateway does not know is said
// so, with every tree shown to pick from.
// Live, the selected actor's machines are also followed through `machines.subscribe`: each move
// a host reports flashes in its statechart for a second (what is lit stays the log's fold).

const rpc = new Rpc();

/** The least time between two reads of the tree's actors while events stream in. */
const REFRESH_MS = 1000;

/** Between two reads of the tree while live and no event comes. */
const TREE_REFRESH_MS = 1000;

/** How long a reported move flashes. */
const FLASH_MS = 1_000;

/** The moves a host just reported, by machine key, for a second each; and how far the feed got (`data-feed`). */
function useLiveFlashes(agentId: string | null, live: boolean): { flashes: Record<string, LiveFlash>; feed: 'off' | 'log' | 'host' } {
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

/** The visualizer page. */
export function App() {
  // each render to its DOM commit is measured (`actorloop:render`): the page bench reads them
  const renderStart = performance.now();
  useLayoutEffect(() => void performance.measure('actorloop:render', { start: renderStart }));
  const [defs, setDefs] = useState<MachineDef[]>([]);
  const [actors, setActors] = useState<ActorRow[]>([]);
  const [faultsAllowed, setFaultsAllowed] = useState(false);
  const [stream, setStream] = useState<StreamEvent[]>([]);
  const [cursor, setCursor] = useState<number | null>(null);
  const [selected, setSelected] = useState<string | null>(new URLSearchParams(location.search).get('actor'));
  const [connected, setConnected] = useState(false);
  const [error, setError] = useState('');
  const [loaded, setLoaded] = useState(false);
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
      setSelected((s) => s ?? r.actors.find((a) => a.parentId === null)?.id ?? null);
    }, (e: Error) => setError(e.message)).finally(() => (asking.current = false));
  };

  useEffect(() => {
    getJson<{ machines: MachineDef[] }>('/v1/machines').then((r) => setDefs(r.machines), (e: Error) => setError(e.message));
    refreshActors();
  }, []);

  const rootRef = useRef<string | null>(null);
  // live, the tree is read again even when nothing is committed (a death commits nothing): the
  // followed tree alone, or every tree while none is followed
  useEffect(() => {
    if (cursor !== null) return;
    const every = setInterval(() => refreshActors(rootRef.current), TREE_REFRESH_MS);
    return () => clearInterval(every);
  }, [cursor]);

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

  const live = cursor === null || cursor >= stream.length;
  const position = live ? stream.length : cursor;
  const folded = useMemo(
    () => (live ? new Map(liveFold.current.advance(stream, stream.length).actors) : foldTree(stream, position)),
    [stream, position, live],
  );
  const rows = treeRows(actors.filter((a) => rootId === null || a.rootId === rootId), folded, live);
  const names = new Map(rows.map((r) => [r.id, r.name]));
  const actor = selected === null ? undefined : folded.get(selected);
  // live, an actor's state is the same object as it grows: its event count says when its charts moved
  const views = useMemo(() => (actor ? machinesOf(actor) : []), [actor, actor?.events.length]);
  const shownEvents = stream.slice(0, position).filter((e) => e.event.actor === selected);
  const at = stream[position - 1];
  const { flashes, feed } = useLiveFlashes(selected, live);

  return (
    <div class="page">
      <header>
        <h1>actorloop</h1>
        <span class={connected && rootId !== null ? 'conn on' : 'conn off'}>{rootId === null ? 'no tree followed' : connected ? 'live stream' : 'disconnected'}</span>
        <div class="travel">
          <input type="range" aria-label="time travel" min={0} max={stream.length} value={position}
            onInput={(e) => {
              const v = Number((e.target as HTMLInputElement).value);
              setCursor(v >= stream.length ? null : v);
            }} />
          <span class="position" data-testid="position">{live ? 'live' : `at ${position}/${stream.length}`}{at ? ` · ${at.event.type} · ${at.event.at.slice(11, 23)}` : ''}</span>
          <button class="live" disabled={live} onClick={() => setCursor(null)}>Live</button>
        </div>
        {error && <span class="error">{error}</span>}
      </header>
      <main>
        <Tree rows={rows} selected={selected} onSelect={setSelected} historyOf={(id) => history.current.of(id)} />
        <div class="detail">
          {unknown && <p class="notice unknown-actor" data-testid="unknown-actor">no actor {selected} here; pick one from the tree</p>}
          {selected && !unknown && history.current.of(selected).length > 0 && (
            <div class="status-history" data-testid="status-history">status seen: {history.current.of(selected).join(' → ')}</div>
          )}
          {actor && <div class="summary-line">{names.get(actor.actorId) ?? actor.actorId} · seq {actor.projection.seq}{actor.projection.plan ? ` · plan v${actor.projection.plan.version}` : ''}{actor.projection.goal ? ` · goal ${actor.projection.goal.objective}` : ''}</div>}
          <section class="charts" aria-label="statecharts" data-feed={feed}>
            {views.map((v) => {
              const def = defs.find((d) => d.id === v.machine);
              return def ? <Statechart key={`${v.machine}:${v.title}`} def={def} view={v} flash={live ? (flashes[v.key] ?? null) : null} /> : null;
            })}
          </section>
          {actor && selected && <Actions agentId={selected} projection={actor.projection} rpc={rpc} live={live} faultsAllowed={faultsAllowed} />}
          <Timeline rows={rows} folded={folded} />
          <EventList events={shownEvents} names={names} />
        </div>
      </main>
    </div>
  );
}
