import { randomBytes } from 'node:crypto';
import type { BlobRef } from '../../protocol/history.js';
import type { BlobStore } from '../../store/blob-port.js';

// A text the log must not hold (a sensitive answer, what the model reads of it) is kept in the
// blob store with a random salt: the log names the blob by digest, and the digest of a short
// secret alone, or of a text around it that anyone can rebuild, could be guessed by hashing
// candidates. The salt is only in the blob, never in the log.

const SEALED_PREFIX = '{"salt":"';

/** Stores `text` salted; the log may name the returned reference. */
export async function sealText(blobs: BlobStore, text: string): Promise<BlobRef> {
  const body = JSON.stringify({ salt: randomBytes(16).toString('hex'), text });
  return { digest: await blobs.put(body), bytes: Buffer.byteLength(body) };
}

/** The text a blob body holds: unsealed when `sealText` stored it, as it is otherwise (older logs stored it bare). */
export function sealedText(body: string): string {
  if (!body.startsWith(SEALED_PREFIX)) return body;
  try {
    const v = JSON.parse(body) as { salt?: unknown; text?: unknown };
    return typeof v.salt === 'string' && typeof v.text === 'string' ? v.text : body;
  } catch {
    return body;
  }
}

/** The text `sealText` stored; undefined when the blob is gone. */
export async function unsealText(blobs: BlobStore, ref: BlobRef): Promise<string | undefined> {
  const body = await blobs.getText(ref.digest);
  return body === undefined ? undefined : sealedText(body);
}
