import { JetStreamApiError, type JetStreamClient, type JetStreamPublishOptions, type PubAck } from '@nats-io/jetstream';
import {
  ClosedConnectionError, createInbox, DrainingConnectionError, headers, InvalidArgumentError, NoRespondersError,
  PermissionViolationError, TimeoutError, type Msg, type NatsConnection, type Subscription,
} from '@nats-io/nats-core';

/** What the log writer needs of a JetStream client: an acked publish, and a manager for its checks. */
export type LogPublisher = Pick<JetStreamClient, 'publish' | 'jetstreamManager'>;

interface Waiting {
  resolve(ack: PubAck): void;
  reject(err: unknown): void;
  deadline: number;
}

/**
 * JetStream's acked publish for the log writer, on one reply subscription per connection.
 *
 * It sends what `js.publish` sends (the message with `Nats-Msg-Id` and
 * `Nats-Expected-Last-Subject-Sequence`, a reply subject) and answers as it does: the PubAck, a
 * `JetStreamApiError` for a refusal (10071 wrong last sequence, …), `NoRespondersError` when no
 * stream listens, `TimeoutError` when no answer came in time and `ClosedConnectionError` when the
 * connection closed first. What it leaves out is nats.js's general request path, which per publish
 * arms a timer, races two promises, builds a `TextDecoder`, and builds an `Error` it throws away
 * once the answer arrived (with or without async traces): a large share of a busy host's CPU.
 * Timeouts are found by one timer, due at the earliest deadline of the answers awaited. It is not
 * cleared when the last answer arrives: a cleared node timer still wakes the event loop when it
 * was due, so a timer per commit (or a sweep every 100 ms) woke a host whose agents all wait on
 * their models several times a second, each wake-up paid in CPU. Now such a host is woken once
 * per deadline at most.
 */
export function createLogPublisher(nc: NatsConnection, js: JetStreamClient, live?: LivePublisher): LogPublisher {
  const prefix = `${createInbox()}.`;
  const waiting = new Map<string, Waiting>();
  let next = 0;
  let sweeper: NodeJS.Timeout | null = null;
  let sweepAt = Infinity;
  const armSweep = (at: number): void => {
    if (sweeper && sweepAt <= at) return;
    if (sweeper) clearTimeout(sweeper);
    sweepAt = at;
    sweeper = setTimeout(sweep, Math.max(0, at - Date.now()));
    sweeper.unref?.();
  };
  const disarm = (): void => {
    if (sweeper) clearTimeout(sweeper);
    sweeper = null;
    sweepAt = Infinity;
  };
  let sub: Subscription | null = null;
  let closed = false;

  const sweep = (): void => {
    sweeper = null;
    sweepAt = Infinity;
    const now = Date.now();
    let earliest = Infinity;
    for (const [token, w] of waiting) {
      if (w.deadline > now) {
        earliest = Math.min(earliest, w.deadline);
        continue;
      }
      waiting.delete(token);
      w.reject(new TimeoutError());
    }
    if (earliest !== Infinity) armSweep(earliest);
  };

  const answer = (msg: Msg): void => {
    const token = msg.subject.slice(prefix.length);
    const w = waiting.get(token);
    if (!w) return;
    waiting.delete(token);
    if (msg.data.length === 0 && msg.headers?.code === 503) return w.reject(new NoRespondersError(msg.subject));
    let body: { error?: ConstructorParameters<typeof JetStreamApiError>[0]; stream?: string; seq?: number; duplicate?: boolean };
    try {
      body = JSON.parse(Buffer.from(msg.data.buffer, msg.data.byteOffset, msg.data.byteLength).toString('utf8'));
    } catch (err) {
      return w.reject(err);
    }
    if (body.error) return w.reject(new JetStreamApiError(body.error));
    if (!body.stream) return w.reject(new Error('invalid ack response'));
    w.resolve({ stream: body.stream, seq: body.seq!, duplicate: body.duplicate === true, domain: '' } as PubAck);
  };

  const listen = (): void => {
    if (sub) return;
    sub = nc.subscribe(`${prefix}*`, { callback: (err, msg) => (err ? undefined : answer(msg)) });
    void sub.closed.then(() => {
      closed = true;
      for (const w of waiting.values()) w.reject(new ClosedConnectionError());
      waiting.clear();
      disarm();
    });
  };

  return {
    async publish(subject: string, payload?: unknown, opts?: Partial<JetStreamPublishOptions>): Promise<PubAck> {
      if (closed || nc.isClosed()) throw new ClosedConnectionError();
      listen();
      const h = headers();
      if (opts?.msgID) h.set('Nats-Msg-Id', opts.msgID);
      const last = opts?.expect?.lastSubjectSequence;
      if (last !== undefined) h.set('Nats-Expected-Last-Subject-Sequence', String(last));
      const token = (next++).toString(36);
      const deadline = Date.now() + (opts?.timeout ?? 5_000);
      const acked = new Promise<PubAck>((resolve, reject) => {
        waiting.set(token, { resolve, reject, deadline });
      });
      armSweep(deadline);
      try {
        nc.publish(subject, payload as string | Uint8Array, { reply: `${prefix}${token}`, headers: h });
      } catch (err) {
        waiting.delete(token);
        throw err;
      }
      // live messages waiting for their turn leave in the same socket write, after the commit:
      // the server reads the commit (whose ack the actor waits for) first
      live?.flush();
      return acked;
    },
    jetstreamManager: (checkAPI?: boolean) => js.jetstreamManager(checkAPI),
  } as LogPublisher;
}

/** Core NATS publishes for clients watching live (model deltas): best effort, never persisted. */
export interface LivePublisher {
  /** Queues a message; it leaves with the next log commit or at the end of this turn of the event loop. */
  publish(subject: string, payload: string): void;
  /** Hands what is queued to the connection now. */
  flush(): void;
}

/**
 * Live messages, held until the next log commit or `setImmediate`, whichever comes first. nats.js
 * writes to the socket once per microtask checkpoint with something to send; a model delta sent
 * on its own costs a loopback write that the commit right after it pays again.
 * Held this way they share the commit's write. A delta reaches watchers at most one turn of the
 * event loop later; one that cannot be sent (the connection closed) is dropped, as a live
 * message no one received would be.
 */
export function createLivePublisher(nc: NatsConnection): LivePublisher {
  let queued: Array<[string, string]> = [];
  let scheduled: NodeJS.Immediate | null = null;
  const flush = (): void => {
    if (scheduled) clearImmediate(scheduled);
    scheduled = null;
    if (queued.length === 0) return;
    const out = queued;
    queued = [];
    if (nc.isClosed()) return;
    try {
      for (const [subject, payload] of out) nc.publish(subject, payload);
    } catch {
      // draining or closed between the check and the publish: live messages are best effort
    }
  };
  return {
    publish(subject, payload) {
      queued.push([subject, payload]);
      scheduled ??= setImmediate(flush);
    },
    flush,
  };
}

/**
 * A failure of a JetStream call the next try may not meet: a timeout, no responders, a 503 (an
 * election, a restart, a meta leader too busy to answer). A closed or draining connection, a bad
 * argument, a permission refused or any other API error is final.
 */
export function transientBusError(err: unknown): boolean {
  const final = [ClosedConnectionError, DrainingConnectionError, InvalidArgumentError, PermissionViolationError];
  if (final.some((c) => err instanceof c || (err as Error)?.cause instanceof c)) return false;
  if (err instanceof JetStreamApiError) return err.status === 503;
  return true;
}
