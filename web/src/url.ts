import { useEffect, useRef, useState } from 'preact/hooks';

// The page's view lives in its URL, so a view can be shared and reloaded: `?actor=<id>` the actor
// shown (none: the runs list), `at=<n>` a time-travel position of its tree's stream (none: live),
// and the runs list's filter (`status`, `q`). Selecting an actor pushes a history entry (Back goes
// to the view before); moving through time replaces the current one (a slider drag is not a
// hundred entries). The token never is in it (api.ts).

/** What the URL says to show. */
export interface PageLocation {
  actor: string | null;
  /** A stream position; null: live. */
  at: number | null;
  status: string;
  q: string;
}

/** The location in the address bar now. */
export function readLocation(): PageLocation {
  const s = new URLSearchParams(location.search);
  const at = s.get('at');
  const n = at === null ? NaN : Number(at);
  return { actor: s.get('actor') || null, at: Number.isInteger(n) && n >= 0 ? n : null, status: s.get('status') ?? '', q: s.get('q') ?? '' };
}

function urlOf(l: PageLocation): string {
  const s = new URLSearchParams();
  if (l.actor !== null) s.set('actor', l.actor);
  if (l.actor !== null && l.at !== null) s.set('at', String(l.at));
  if (l.actor === null && l.status !== '') s.set('status', l.status);
  if (l.actor === null && l.q !== '') s.set('q', l.q);
  const q = s.toString();
  return `${location.pathname}${q === '' ? '' : `?${q}`}`;
}

/**
 * The location as state: `go(change, push)` moves to it (pushing a history entry, or replacing the
 * current one), and Back / Forward move the page with the address bar.
 */
export function useLocation(): [PageLocation, (change: Partial<PageLocation>, push?: boolean) => void] {
  const [loc, setLoc] = useState<PageLocation>(readLocation);
  const current = useRef(loc);
  current.current = loc;
  useEffect(() => {
    const back = (): void => setLoc(readLocation());
    addEventListener('popstate', back);
    return () => removeEventListener('popstate', back);
  }, []);
  // one function for the page's life: rows memoized on their props see the same one each render
  const go = useRef((change: Partial<PageLocation>, push = false): void => {
    const next = { ...current.current, ...change };
    current.current = next;
    const url = urlOf(next);
    if (url !== `${location.pathname}${location.search}`) {
      if (push) history.pushState(null, '', url);
      else history.replaceState(null, '', url);
    }
    setLoc(next);
  }).current;
  return [loc, go];
}
