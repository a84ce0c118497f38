// What an operator who looked away missed: the statuses each actor passed through while the page
// watched, in order — a kill, the recovery after it (often a few milliseconds, too brief for a
// badge to be seen) and the run on the next host. Two sources feed it: the gateway's reads (the
// only one that knows of a host dying before anything is committed) and the page's own fold of
// each event as it arrives. Each note carries the stream position it speaks for — the gateway's
// for the end of a commit (its stream sequence), the fold's for an event inside one (a commit
// holds several events: a takeover's `actor/killed`, `actor/rehydrated` and the next attempt come
// in one) — and a note older than the last one taken for its actor (a read answered before events
// the page has already folded, a commit replayed that a read already spoke for) is stale and left
// out, so the history never steps back.

/** How many statuses are kept per actor: the latest ones. */
const KEPT = 16;

/** Where in the stream a note speaks for: a commit's stream sequence, and whether for all of it (a read) or one of its events (the fold). */
export interface NotePosition {
  streamSeq: number;
  whole: boolean;
}

/** The statuses each actor was seen in, in order, consecutive repeats folded. */
export class StatusHistory {
  private readonly seen = new Map<string, { statuses: string[]; position: number }>();

  /**
   * Notes that `actorId` was seen `status` at `at` (undefined: a source that does not say, never
   * stale). True when the history changed.
   */
  note(actorId: string, status: string, at: NotePosition | undefined): boolean {
    let h = this.seen.get(actorId);
    if (!h) this.seen.set(actorId, (h = { statuses: [], position: 0 }));
    if (at !== undefined) {
      // an event inside commit N comes before the end of N, and after the end of N - 1
      const position = at.whole ? at.streamSeq : at.streamSeq - 0.5;
      if (position < h.position) return false;
      h.position = position;
    }
    if (h.statuses[h.statuses.length - 1] === status) return false;
    h.statuses.push(status);
    if (h.statuses.length > KEPT) h.statuses.splice(0, h.statuses.length - KEPT);
    return true;
  }

  /** The statuses `actorId` was seen in, oldest first. */
  of(actorId: string): readonly string[] {
    return this.seen.get(actorId)?.statuses ?? [];
  }
}
