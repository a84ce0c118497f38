// What an operator who looked away missed: the statuses each actor passed through while the page
// watched, in order — a kill, the recovery after it (often a few milliseconds, too brief for a
// badge to be seen) and the run on the next host. Two sources feed it: the gateway's reads (the
// only one that knows of a host dying before anything is committed) and the page's own fold of
// each event as it arrives. Each note carries the stream position it speaks for; a note older
// than the last one taken for its actor (a read answered before events the page has already
// folded) is stale and left out, so the history never steps back.

/** How many statuses are kept per actor: the latest ones. */
const KEPT = 16;

/** The statuses each actor was seen in, in order, consecutive repeats folded. */
export class StatusHistory {
  private readonly seen = new Map<string, { statuses: string[]; streamSeq: number }>();

  /**
   * Notes that `actorId` was seen `status` as of stream position `streamSeq` (undefined: a source
   * that does not say, never stale). True when the history changed.
   */
  note(actorId: string, status: string, streamSeq: number | undefined): boolean {
    let h = this.seen.get(actorId);
    if (!h) this.seen.set(actorId, (h = { statuses: [], streamSeq: 0 }));
    if (streamSeq !== undefined) {
      if (streamSeq < h.streamSeq) return false;
      h.streamSeq = streamSeq;
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
