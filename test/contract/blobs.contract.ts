import { describe, expect, it } from 'vitest';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import type { BlobStore } from '../../src/store/blob-port.js';

/** A store for one test, and how to drop it afterwards. */
export interface BlobSubject {
  blobs: BlobStore;
  close(): Promise<void>;
}

/**
 * What every `BlobStore` must do: content-addressed by `sha256:` digest, readable at once (before
 * its batch commits), equal content stored once, a continuation (`BlobDelta`) read back as the
 * whole body it describes, bytes copied at put (a caller may reuse its buffer), and a digest it
 * never stored reads as missing.
 */
export function blobContract(name: string, open: () => Promise<BlobSubject>): void {
  describe(`BlobStore contract: ${name}`, () => {
    const withStore = async (f: (blobs: BlobStore) => Promise<void>): Promise<void> => {
      const s = await open();
      try {
        await f(s.blobs);
      } finally {
        await s.close();
      }
    };

    it('names content by its sha256 digest and serves it at once, as bytes and as text', () => withStore(async (blobs) => {
      const text = '{"é":"héllo"}';
      const digest = await blobs.put(text);
      expect(digest).toBe(sha256Digest(text));
      expect(await blobs.has(digest)).toBe(true);
      expect(await blobs.getText(digest)).toBe(text);
      expect(Buffer.from((await blobs.get(digest))!).toString('utf8')).toBe(text);
      await blobs.flush();
      expect(await blobs.getText(digest)).toBe(text);
    }));

    it('gives equal content the same digest, whether bytes or text', () => withStore(async (blobs) => {
      const a = await blobs.put('same');
      const b = await blobs.put(Buffer.from('same', 'utf8'));
      const c = await blobs.put(new TextEncoder().encode('same'));
      expect(new Set([a, b, c])).toEqual(new Set([sha256Digest('same')]));
      await blobs.flush();
      expect(await blobs.getText(a)).toBe('same');
    }));

    it('keeps the bytes it was given, not the caller\'s buffer', () => withStore(async (blobs) => {
      const buf = Buffer.from('original', 'utf8');
      const digest = await blobs.put(buf);
      buf.write('XXXXXXXX');
      await blobs.flush();
      expect(await blobs.getText(digest)).toBe('original');
    }));

    it('serves a blob before its put resolves', () => withStore(async (blobs) => {
      const text = `waiting ${Math.random()}`;
      const put = blobs.put(text);
      expect(await blobs.getText(sha256Digest(text))).toBe(text);
      expect(await put).toBe(sha256Digest(text));
    }));

    it('takes a digest the caller computed from the same bytes', () => withStore(async (blobs) => {
      const body = '{"model":"m"}';
      expect(await blobs.put(body, sha256Digest(body))).toBe(sha256Digest(body));
      expect(await blobs.getText(sha256Digest(body))).toBe(body);
    }));

    it('reads a continuation back as the whole body it describes, over a chain of them', () => withStore(async (blobs) => {
      let open = '{"messages":[{"role":"system","content":"héllo"}';
      let prev: string | null = null;
      const bodies: Array<{ digest: string; body: string }> = [];
      for (let i = 0; i < 20; i++) {
        const added = `,{"role":"tool","content":"${'é'.repeat(i % 5)}${i}"}`;
        const body = `${open}${added}],"n":${i}}`;
        const digest = sha256Digest(body);
        const delta = prev === null ? undefined : { base: prev, bytes: Buffer.byteLength(open), suffix: `${added}],"n":${i}}` };
        expect(await blobs.put(body, digest, delta)).toBe(digest);
        bodies.push({ digest, body });
        prev = digest;
        open += added;
      }
      await blobs.flush();
      for (const b of bodies) expect(await blobs.getText(b.digest)).toBe(b.body);
    }));

    it('reads a digest it never stored as missing', () => withStore(async (blobs) => {
      const absent = sha256Digest('never stored');
      expect(await blobs.has(absent)).toBe(false);
      expect(await blobs.get(absent)).toBeUndefined();
      expect(await blobs.getText(absent)).toBeUndefined();
    }));
  });
}
