/**
 * A blob written as the continuation of another: its first `bytes` bytes are the first `bytes`
 * bytes of blob `base`, and `suffix` is the rest. A turn's prepared requests are this: each one's
 * body is the last one's up to the end of the history, plus the step's new items. Here, not in
 * `store/`, because a model adapter says it of the bodies it prepares and the blob store keeps it.
 */
export interface BlobDelta {
  base: string;
  bytes: number;
  suffix: string | Uint8Array;
}
