import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import { z } from 'zod';
import { liveSubject } from '../bus/subjects.js';
import type { FollowTarget } from './follower.js';

/**
 * One model stream event as a client reads it on `live.<rootId>.<actorId>`: the supervisor
 * publishes each event of a model attempt's stream there (core NATS, never persisted). Only what a
 * client shows is checked; the rest of `done`'s output passes through.
 */
export const LiveDeltaSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text_delta'), text: z.string() }),
  z.object({
    type: z.literal('tool_call_delta'),
    index: z.number().int().nonnegative(),
    id: z.string().optional(),
    name: z.string().optional(),
    argumentsDelta: z.string(),
  }),
  z.object({ type: z.literal('done'), output: z.object({ content: z.string().nullable() }).passthrough() }),
]);
/** A live model delta: streamed text, a piece of a tool call, or the end of the stream. */
export type LiveDelta = z.infer<typeof LiveDeltaSchema>;

/** A watch on one agent's live deltas, until closed. */
export interface LiveWatch {
  /** Resolves once the server has the subscription: deltas published after it are delivered. */
  ready: Promise<void>;
  /** Stops the watch; idempotent. */
  close(): void;
}

/**
 * Where a client gets an agent's live model deltas (design §4: stream deltas go to clients live;
 * only the accepted outcome is committed). Best effort: a delta may be missed (a slow consumer, a
 * reconnect, a watch opened mid-stream), so whoever shows them keeps the committed
 * `assistant/accepted` as the truth.
 */
export interface LiveSource {
  /** Calls `onDelta` for each delta of the agent's model streams from now on, in the order published. */
  watch(target: FollowTarget, onDelta: (d: LiveDelta) => void): LiveWatch;
}

/** The live source over a NATS connection: one core subscription per watch on the agent's live subject. */
export function createNatsLiveSource(nc: NatsConnection): LiveSource {
  return { watch: (target, onDelta) => watchLive(nc, liveSubject(target.rootId, target.actorId), LiveDeltaSchema, onDelta) };
}

/**
 * One core subscription to a live subject until closed, calling `on` with each message that
 * parses as `schema`; a message of a shape this client does not know is skipped (live messages are
 * best effort: the log is the truth). A closed or draining connection gives a watch that delivers
 * nothing.
 */
export function watchLive<T>(nc: NatsConnection, subject: string, schema: z.ZodType<T>, on: (value: T) => void): LiveWatch {
  let sub: Subscription | null = null;
  try {
    sub = nc.subscribe(subject, {
      callback: (err, msg) => {
        if (err) return;
        let parsed;
        try {
          parsed = schema.safeParse(msg.json());
        } catch {
          return;
        }
        if (parsed.success) on(parsed.data);
      },
    });
  } catch {
    // a closed or draining connection: nothing live, the committed events still come
    sub = null;
  }
  const ready = sub ? nc.flush().catch(() => {}) : Promise.resolve();
  return {
    ready,
    close() {
      const s = sub;
      sub = null;
      if (!s || s.isClosed()) return;
      try {
        s.unsubscribe();
      } catch {
        // the connection closed first: the subscription went with it
      }
    },
  };
}
