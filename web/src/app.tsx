import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { machinesOf } from './active-states.js';
import { Actions } from './actions.js';
import { followEvents, getJson, Rpc, type ActorRow, type ActorsResponse, type StreamEvent } from './api.js';
import { EventList } from './event-list.js';
import { foldTree, TreeFolder } from './fold.js';
import { Statechart, type MachineDef } from './statechart.js';
import { Timeline } from './timeline.js';
import { Tree, treeRows } from './tree.js';

// The page: the tree on the left; for the selected actor its statecharts, the actions, the
// timeline and the events; the time-travel slider on top. Everything shown at a position of the
// stream is folded from the events up to it; "live" is the last position.

const rpc = new Rpc();

/** The least time between two reads of the tree's actors while events stream in. */
const REFRESH_MS = 1000;

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
  const buffer = useRef<StreamEvent[]>([]);
  // live, the tree's fold moves forward one event at a time; a past position is folded anew
  const liveFold = useRef(new TreeFolder());

  const refreshActors = (root: string | null = null): void => {
    getJson<ActorsResponse>(root === null ? '/v1/actors' : `/v1/actors?root=${encodeURIComponent(root)}`).then((r) => {
      setActors(r.actors);
      setFaultsAllowed(r.faultsAllowed === true || r.allowFaults === true);
      setSelected((s) => s ?? r.actors.find((a) => a.parentId === null)?.id ?? null);
    }, (e: Error) => setError(e.message));
  };

  useEffect(() => {
    getJson<{ machines: MachineDef[] }>('/v1/machines').then((r) => setDefs(r.machines), (e: Error) => setError(e.message));
    refreshActors();
  }, []);

  const rootId = useMemo(() => (selected === null ? null : (actors.find((a) => a.id === selected)?.rootId ?? selected)), [selected, actors]);

  useEffect(() => {
    if (rootId === null) return;
    setStream([]);
    buffer.current = [];
    liveFold.current = new TreeFolder();
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

  return (
    <div class="page">
      <header>
        <h1>actorloop</h1>
        <span class={connected ? 'conn on' : 'conn off'}>{connected ? 'live stream' : 'disconnected'}</span>
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
        <Tree rows={rows} selected={selected} onSelect={setSelected} />
        <div class="detail">
          {actor && <div class="summary-line">{names.get(actor.actorId) ?? actor.actorId} · seq {actor.projection.seq}{actor.projection.plan ? ` · plan v${actor.projection.plan.version}` : ''}{actor.projection.goal ? ` · goal ${actor.projection.goal.objective}` : ''}</div>}
          <section class="charts" aria-label="statecharts">
            {views.map((v) => {
              const def = defs.find((d) => d.id === v.machine);
              return def ? <Statechart key={`${v.machine}:${v.title}`} def={def} view={v} /> : null;
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
