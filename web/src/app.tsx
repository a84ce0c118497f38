import { useEffect, useState } from 'preact/hooks';
import { pendingEverywhere, Rpc } from './api.js';
import { NeedsYou, type PendingItem } from './needs-you.js';
import { RunsList } from './runs.js';
import { TreeView } from './tree-view.js';
import { useLocation } from './url.js';

// The page, an operator's console. Without `?actor=` it opens on the runs list (every root agent,
// newest first, from the gateway) under what needs a person anywhere; with it, on that actor's
// tree: what needs a person in the tree first, then the actor's summary, its actions, timeline,
// events and statecharts. The URL follows the selection and the time-travel position, so a view
// can be shared; the runs list opens as a panel from any actor. The page's title counts what
// waits on a person.

const rpc = new Rpc();

/** Between two reads of what needs a person, on the runs list. */
const PENDING_REFRESH_MS = 2000;

/** The title: how many things wait on a person, first, where a tab bar shows it. */
function useTitle(waiting: number): void {
  useEffect(() => {
    document.title = waiting > 0 ? `(${waiting}) actorloop · needs you` : 'actorloop';
  }, [waiting]);
}

/** The runs list and what needs a person anywhere: the page without `?actor=`. */
function Home({ status, q, onFilter, onOpen }: { status: string; q: string; onFilter: (status: string, q: string) => void; onOpen: (id: string) => void }) {
  const [pending, setPending] = useState<PendingItem[]>([]);
  const [error, setError] = useState('');
  useEffect(() => {
    let stopped = false;
    const read = (): void => void pendingEverywhere().then((p) => !stopped && (setPending(p), setError('')), (e: Error) => !stopped && setError(e.message));
    read();
    const every = setInterval(read, PENDING_REFRESH_MS);
    return () => {
      stopped = true;
      clearInterval(every);
    };
  }, []);
  useTitle(pending.length);
  return (
    <div class="page">
      <header>
        <h1>actorloop</h1>
        <span class="crumb">runs</span>
        {error && <span class="error">{error}</span>}
      </header>
      <main class="home">
        <NeedsYou items={pending} rpc={rpc} live={true} onOpen={onOpen} scope="across every run" />
        <RunsList status={status} q={q} onFilter={onFilter} onOpen={onOpen} />
      </main>
    </div>
  );
}

/** The visualizer page. */
export function App() {
  const [loc, go] = useLocation();
  if (loc.actor === null) {
    return <Home status={loc.status} q={loc.q} onFilter={(status, q) => go({ status, q })} onOpen={(id) => go({ actor: id, at: null }, true)} />;
  }
  return <TreeView rpc={rpc} loc={loc} go={go} useTitle={useTitle} />;
}
