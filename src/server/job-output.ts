import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import { z } from 'zod';
import { liveSubject } from '../bus/subjects.js';

// A running job's output as its host publishes it (core NATS on the job's live subject, never
// persisted: design §11b), relayed by the gateway to a page watching the job
// (`GET /v1/jobs/:id/output`). Best effort, as every live subject is: a chunk may be missed (a slow
// consumer, a watch opened mid-run), so whoever shows them keeps the terminal `job/phase`'s tail
// as the truth once the job ends.

/** One chunk of a job's output on its live subject. */
export const JobOutputChunkSchema = z.object({ type: z.literal('job/output'), text: z.string() });
/** One chunk of a job's output. */
export type JobOutputChunk = z.infer<typeof JobOutputChunkSchema>;

/** A watch on one job's live output, until closed. */
export interface JobOutputWatch {
  /** Resolves once the server has the subscription: chunks published after it are delivered. */
  ready: Promise<void>;
  /** Stops the watch; idempotent. */
  close(): void;
}

/** Where the gateway hears a job's live output. */
export interface JobOutputSource {
  /** Calls `onText` with each chunk of the job's output from now on, in the order published. */
  watch(target: { rootId: string; jobId: string }, onText: (text: string) => void): JobOutputWatch;
}

/** The job output source over a NATS connection: one core subscription per watch on the job's live subject. */
export function createNatsJobOutputSource(nc: NatsConnection): JobOutputSource {
  return {
    watch(target, onText) {
      let sub: Subscription | null = nc.subscribe(liveSubject(target.rootId, target.jobId), {
        callback: (err, msg) => {
          if (err) return;
          let parsed;
          try {
            parsed = JobOutputChunkSchema.safeParse(msg.json());
          } catch {
            return;
          }
          // a message of a shape this gateway does not know is skipped: live output is best effort
          if (parsed.success) onText(parsed.data.text);
        },
      });
      return {
        // the subscription reaches the server with the next flush: chunks after it are ours
        ready: nc.flush(),
        close() {
          sub?.unsubscribe();
          sub = null;
        },
      };
    },
  };
}
