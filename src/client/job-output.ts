import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import { z } from 'zod';
import { liveSubject } from '../bus/subjects.js';
import type { LiveWatch } from './live.js';

/**
 * One chunk of a running job's output as its host publishes it on `live.<rootId>.<jobId>` (core
 * NATS, never persisted): redacted, best effort. The whole output is the artifact its terminal
 * `job/phase` names, and the last lines are that phase's `end.tail`.
 */
export const JobOutputChunkSchema = z.object({ type: z.literal('job/output'), text: z.string() });
/** A live chunk of a job's output. */
export type JobOutputChunk = z.infer<typeof JobOutputChunkSchema>;

/**
 * Calls `onText` with each chunk of the job's live output from now on, in the order published;
 * a message of another shape is skipped (live output is best effort, the log is the truth).
 */
export function watchJobOutput(nc: NatsConnection, rootId: string, jobId: string, onText: (text: string) => void): LiveWatch {
  let sub: Subscription | null = null;
  try {
    sub = nc.subscribe(liveSubject(rootId, jobId), {
      callback: (err, msg) => {
        if (err) return;
        let parsed;
        try {
          parsed = JobOutputChunkSchema.safeParse(msg.json());
        } catch {
          return;
        }
        if (parsed.success) onText(parsed.data.text);
      },
    });
  } catch {
    // a closed or draining connection: no live output, the committed end's tail still comes
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
