import type { ActorEvent } from '../protocol/events.js';

/**
 * An actor's incarnations as a person counts them (1, 2, 3…). An epoch is a lease revision: large,
 * with gaps, shared with every other lease of the bucket, so it means nothing to a reader. The
 * incarnations are the distinct epochs the log shows, in order: each event's own epoch, and the
 * epoch an `actor/killed` names (an incarnation that died before writing anything shows only
 * there). Epochs only grow, so the list stays sorted; an incarnation that died writing nothing is
 * inserted before the one that found it, so numbers are settled once a recovery's `actor/killed`
 * events are read (they come first in it).
 */
export function noteEpochs(epochs: number[], e: ActorEvent): void {
  if (e.type === 'actor/killed') insertSorted(epochs, e.data.epoch);
  insertSorted(epochs, e.epoch);
}

/** The incarnation number (1-based) of `epoch` among `epochs`; null when the log never showed it. */
export function incarnationOf(epochs: readonly number[], epoch: number): number | null {
  const i = epochs.indexOf(epoch);
  return i < 0 ? null : i + 1;
}

function insertSorted(epochs: number[], epoch: number): void {
  // almost always the last one already, or a new last one
  const last = epochs.at(-1);
  if (last === epoch) return;
  if (last === undefined || epoch > last) {
    epochs.push(epoch);
    return;
  }
  if (epochs.includes(epoch)) return;
  const at = epochs.findIndex((x) => x > epoch);
  epochs.splice(at, 0, epoch);
}
