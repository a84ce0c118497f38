import type { EventType } from '../../protocol/events.js';
import { StoreError, STORE_CODES } from '../../protocol/errors.js';
import { formatBytes } from '../../tools/observation.js';

// A blob the log names that the blob store lacks cannot come back: the log holds only its
// digest (and a preview), and nothing else holds the bytes. So the error says so, and names the
// event that needs it, which is what a person looks up with `actorloop events`.

/** The event of an actor's log whose data names a blob. */
export interface BlobNaming {
  actorId: string;
  type: EventType;
  seq: number;
}

/** Finds the first event of the agent's own log that names `digest`; null when none does (or the log cannot be read). */
export type FindBlobNaming = (digest: string) => Promise<BlobNaming | null>;

/** What `missingBlob` needs to know of the agent. */
export interface MissingBlobScope {
  /** The agent (absent: not known here). */
  actorId?: string;
  find?: FindBlobNaming;
}

/** The scope of an agent's missing blobs: its ID, and its port that finds the event naming one. */
export function blobScope(a: { actorId: string; ports: { blobNaming?: FindBlobNaming } }): MissingBlobScope {
  return a.ports.blobNaming ? { actorId: a.actorId, find: a.ports.blobNaming } : { actorId: a.actorId };
}

/**
 * The final error of a blob the log names that the store does not hold: `what` it is (`model
 * output`, `artifact art_…`), its digest and size, and the event that names it.
 */
export async function missingBlob(scope: MissingBlobScope, ref: { digest: string; bytes?: number }, what: string): Promise<StoreError> {
  const naming = scope.find ? await scope.find(ref.digest).catch(() => null) : null;
  const size = ref.bytes === undefined ? what : `${formatBytes(ref.bytes)} of ${what}`;
  const by = naming ? `${naming.type} seq ${naming.seq} of ${naming.actorId}` : scope.actorId ? `the log of ${scope.actorId}` : 'the log';
  return new StoreError(STORE_CODES.blobMissing, `blob ${ref.digest} (${size}) named by ${by} is not in the blob store`, {
    retryable: false,
    hint: 'this is final: the log alone cannot rebuild it; the blob store lost it: it was removed from the blob bucket ' +
      '(actorloop gc with a grace shorter than the commit took, or a purge) or was written only to the LMDB of a host whose data dir is gone',
  });
}
