/**
 * How a blob store keeps a continuation (`BlobDelta`): a record under `delta:<digest>` holding one
 * JSON header line `{base, bytes, chain}`, then the suffix's bytes. The LMDB store and the object
 * store write the same record, so one can be copied into the other as it is.
 */

/** The key (LMDB) or object name (Object Store) of a blob stored as a continuation of another. */
export const deltaKey = (digest: string): string => `delta:${digest}`;

/** The digest a `delta:` key names, or undefined for a key of a whole blob. */
export function digestOfDeltaKey(key: string): string | undefined {
  return key.startsWith('delta:') ? key.slice('delta:'.length) : undefined;
}

/** The header line of a continuation record. */
export interface DeltaHeader {
  /** The blob whose first `bytes` bytes this one starts with. */
  base: string;
  bytes: number;
  /** Continuations from here to a blob stored whole (1: the base is whole). */
  chain: number;
}

/** A continuation record: its header and the bytes that follow the base's first `bytes`. */
export interface DeltaRecord {
  header: DeltaHeader;
  suffix: Uint8Array;
}

/** The record of a continuation. */
export function encodeDelta(h: DeltaHeader, suffix: string | Uint8Array): Buffer {
  const head = Buffer.from(`${JSON.stringify(h)}\n`, 'utf8');
  const tail = typeof suffix === 'string' ? Buffer.from(suffix, 'utf8') : suffix;
  return Buffer.concat([head, tail]);
}

/** A continuation record read back; undefined when it is not one. */
export function decodeDelta(record: Uint8Array): DeltaRecord | undefined {
  const nl = record.indexOf(10);
  if (nl < 0) return undefined;
  try {
    const header = JSON.parse(Buffer.from(record.buffer, record.byteOffset, nl).toString('utf8')) as DeltaHeader;
    if (typeof header?.base !== 'string' || typeof header.bytes !== 'number' || typeof header.chain !== 'number') return undefined;
    return { header, suffix: record.subarray(nl + 1) };
  } catch {
    return undefined;
  }
}

/** The bytes a continuation describes, given its base's bytes; undefined when the base is too short. */
export function applyDelta(base: Uint8Array, d: DeltaRecord): Buffer | undefined {
  if (base.length < d.header.bytes) return undefined;
  return Buffer.concat([base.subarray(0, d.header.bytes), d.suffix]);
}
