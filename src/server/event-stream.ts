import type { ActorEvent } from '../protocol/events.js';
import type { LogReader, TreeEvent } from '../store/log-port.js';
import { redactJson, type RedactText } from './redact-json.js';

// The one event stream of the gateway (design §11): SSE and `events.subscribe` both read it. A
// cursor is a stream sequence (a commit), so events go out a commit at a time: a client holding
// a commit's last sequence has every event of it, and resuming after it skips none and repeats
// none.

/** One event as the gateway serves it: its commit's stream sequence, its actor, the event redacted. */
export interface ServedEvent {
  streamSeq: number;
  actor: string;
  event: ActorEvent;
}

/** What to stream: one actor's log, or (`tree`) every log of its tree, after a stream sequence. */
export interface EventStreamOptions {
  reader: Pick<LogReader, 'followTree'>;
  rootId: string;
  actorId: string;
  tree: boolean;
  afterStreamSeq: number;
  redact: RedactText;
  signal: AbortSignal;
}

/**
 * The commits after the cursor, live until `signal` aborts, each as the list of its events. One
 * actor's log is read as its tree's filtered to it: the tree's consumer starts at the cursor,
 * where an actor's own read would start at its first event.
 */
export async function* eventCommits(o: EventStreamOptions): AsyncGenerator<ServedEvent[]> {
  const source = o.reader.followTree(o.rootId, { afterStreamSeq: o.afterStreamSeq, signal: o.signal });
  for await (const batch of commitBatches(source)) {
    const mine = o.tree ? batch : batch.filter((e) => e.actorId === o.actorId);
    if (mine.length === 0) continue;
    yield mine.map((e) => ({ streamSeq: e.streamSeq, actor: e.actorId, event: redactJson(e.event, o.redact) }));
  }
}

const nextTurn = (): Promise<null> => new Promise((resolve) => setImmediate(() => resolve(null)));

/**
 * Groups a reader's events by commit. The reader yields a commit's events one after another with
 * no I/O between them, so a commit is over when the next event has another stream sequence or
 * when none is ready by the next turn of the event loop (the reader waits for the bus).
 */
export async function* commitBatches(source: AsyncIterable<TreeEvent>): AsyncGenerator<TreeEvent[]> {
  const it = source[Symbol.asyncIterator]();
  let batch: TreeEvent[] = [];
  let next: Promise<IteratorResult<TreeEvent>> | null = null;
  try {
    for (;;) {
      next ??= it.next();
      if (batch.length > 0) {
        const ready = await Promise.race([next, nextTurn()]);
        if (ready === null) {
          yield batch;
          batch = [];
          continue;
        }
      }
      const r = await next;
      next = null;
      if (r.done) {
        if (batch.length > 0) yield batch;
        return;
      }
      if (batch.length > 0 && batch[0]!.streamSeq !== r.value.streamSeq) {
        yield batch;
        batch = [];
      }
      batch.push(r.value);
    }
  } finally {
    // the consumer stopped: the reader's consumer is stopped with it (its signal is aborted too)
    void it.return?.().catch(() => {});
  }
}
