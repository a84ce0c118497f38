import { useEffect, useRef, useState } from 'preact/hooks';
import { outcomeWords } from '../../src/client/outcome-words.js';
import { getJson, type RunRow, type RunsPage } from './api.js';
import { costText, durationText, firstLine, timeText, tokensText } from './format.js';

// The runs list, as Temporal's web UI opens on its executions: every root agent newest first, with
// its ID, task, status (and who or what it waits on), when it started and ended, how long it took,
// its tokens, cost and children; filtered by status and text, a page at a time, as the gateway
// folds them (`GET /v1/runs`: the browser folds no log for it). Live: the page shown is asked for
// again every two seconds. Clicking a run opens it.

/** Runs a page shows. */
const PAGE_SIZE = 25;
/** Between two reads of the page shown. */
const REFRESH_MS = 2000;

/** The statuses the filter offers (`waiting`: the run waits on a person somewhere in its tree). */
const STATUSES = ['', 'running', 'waiting', 'completed', 'failed', 'stopped', 'cancelled', 'killed', 'released', 'idle'];

interface RunsListProps {
  status: string;
  q: string;
  onFilter: (status: string, q: string) => void;
  onOpen: (actorId: string) => void;
  /** The run shown now, marked in the list (the panel opened from an actor). */
  current?: string | null;
}

function WaitingOn({ run }: { run: RunRow }) {
  if (run.waitingOn.length === 0) return null;
  const first = run.waitingOn[0]!;
  return (
    <div class="waiting-on" data-testid="run-waiting-on">
      waits on a person: {first.kind === 'approval' ? 'approval' : 'answer'} for {first.name}{run.waitingOn.length > 1 ? ` and ${run.waitingOn.length - 1} more` : ''}
    </div>
  );
}

/** The runs list with its filters and pages. */
export function RunsList({ status, q, onFilter, onOpen, current = null }: RunsListProps) {
  const [page, setPage] = useState<RunsPage | null>(null);
  const [error, setError] = useState('');
  // the cursors of the pages before the one shown: Newer goes back one
  const [cursors, setCursors] = useState<string[]>([]);
  const [text, setText] = useState(q);
  const cursor = cursors.at(-1) ?? null;
  const asking = useRef(false);

  useEffect(() => setCursors([]), [status, q]);
  useEffect(() => {
    let stopped = false;
    const read = (): void => {
      if (asking.current) return;
      asking.current = true;
      const s = new URLSearchParams({ limit: String(PAGE_SIZE) });
      if (status !== '') s.set('status', status);
      if (q !== '') s.set('q', q);
      if (cursor !== null) s.set('before', cursor);
      getJson<RunsPage>(`/v1/runs?${s}`).then((r) => {
        if (stopped) return;
        setPage(r);
        setError('');
      }, (e: Error) => !stopped && setError(e.message)).finally(() => (asking.current = false));
    };
    read();
    const every = setInterval(read, REFRESH_MS);
    return () => {
      stopped = true;
      clearInterval(every);
    };
  }, [status, q, cursor]);

  const runs = page?.runs ?? [];
  return (
    <section class="runs" aria-label="runs">
      <h2>Runs <span class="count">{page ? `${page.total} ${status || q ? 'matching' : 'in all'}` : ''}</span></h2>
      <form class="run-filters" onSubmit={(e) => { e.preventDefault(); onFilter(status, text.trim()); }}>
        <select aria-label="status filter" value={status} onChange={(e) => onFilter((e.target as HTMLSelectElement).value, text.trim())}>
          {STATUSES.map((s) => <option key={s} value={s}>{s === '' ? 'every status' : s}</option>)}
        </select>
        <input aria-label="search runs" placeholder="ID, name or task" value={text} onInput={(e) => setText((e.target as HTMLInputElement).value)} />
        <button>Search</button>
        {(status !== '' || q !== '') && <button type="button" onClick={() => { setText(''); onFilter('', ''); }}>Clear</button>}
      </form>
      {error && <p class="error-note">{error}</p>}
      {page && runs.length === 0 && <p class="muted" data-testid="runs-empty">{status || q ? 'no run matches the filter' : 'no runs yet: start one with `actorloop run "<task>"`'}</p>}
      {runs.length > 0 && (
        <table class="run-table">
          <colgroup><col class="c-run" /><col class="c-task" /><col class="c-status" /><col class="c-time" /><col class="c-num" /><col class="c-num" /></colgroup>
          <thead><tr><th>run</th><th>task</th><th>status</th><th>started · took</th><th>tokens · cost</th><th>children</th></tr></thead>
          <tbody>
            {runs.map((r) => (
              <tr key={r.id} class={r.id === current ? 'run current' : 'run'} data-run={r.id} data-status={r.status} onClick={() => onOpen(r.id)}>
                <td><a href={`?actor=${encodeURIComponent(r.id)}`} onClick={(e) => { e.preventDefault(); e.stopPropagation(); onOpen(r.id); }}>{r.name}</a><div><code class="id">{r.id}</code></div></td>
                <td class="task" title={r.task ?? ''}>{firstLine(r.task, 160) || <span class="muted">no task yet</span>}</td>
                <td><span class={`badge status-${r.status}`}>{r.status.replace('_', ' ')}</span><WaitingOn run={r} />{r.reason && <div class="run-reason" title={outcomeWords(r.status, r.reason)}>{firstLine(r.reason, 80)}</div>}</td>
                <td>{timeText(r.startedAt)}<div class="muted">{r.durationMs !== null ? `took ${durationText(r.durationMs)}` : r.endedAt === null ? `for ${durationText(Math.max(0, Date.now() - Date.parse(r.startedAt)))}` : ''}</div></td>
                <td>{tokensText(r.tokens)}<div class="muted">{costText(r.costUsd)}</div></td>
                <td>{r.children}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <div class="pager">
        <button class="newer" disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>← Newer</button>
        <button class="older" disabled={!page?.next} onClick={() => page?.next && setCursors([...cursors, page.next])}>Older →</button>
      </div>
    </section>
  );
}
