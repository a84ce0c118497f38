import type { NatsConnection } from '@nats-io/nats-core';
import { z } from 'zod';
import { liveSubject } from '../bus/subjects.js';
import { watchLive, type LiveWatch } from './live.js';

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
  return watchLive(nc, liveSubject(rootId, jobId), JobOutputChunkSchema, (chunk) => onText(chunk.text));
}
