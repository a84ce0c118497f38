import { describe, expect, it } from 'vitest';
import { INLINE_OUTPUT_BYTES, OutputTexts, clipStrings, maxOutputBytesOf, storeOutput } from '../../src/actors/agent/output-blobs.js';
import type { StoreError } from '../../src/protocol/errors.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import type { TurnSettings } from '../../src/protocol/events.js';
import type { HistoryItem } from '../../src/protocol/history.js';
import { createMemoryBlobStore } from '../../src/store/memory-blobs.js';

const call = (id: string, args: string) => ({ id, name: 'write_file', arguments: args });

describe('storeOutput', () => {
  it('leaves output within the inline budget as it is, and stores nothing', async () => {
    const blobs = createMemoryBlobStore();
    const output = { content: 'short', toolCalls: [call('a', '{"path":"x","content":"y"}')] };
    expect(await storeOutput(output, blobs)).toEqual(output);
    expect(blobs.size()).toBe(0);
  });

  it('stores the largest parts until the rest fits, each named by the digest of its bytes', async () => {
    const blobs = createMemoryBlobStore();
    const big = 'b'.repeat(200_000);
    const mid = 'm'.repeat(40_000);
    const output = { content: mid, toolCalls: [call('a', big), call('b', '{}'), call('c', mid + 'x')] };
    const stored = await storeOutput(output, blobs);
    // big and one of the two mid-sized parts go; the other mid-sized one and the small one stay inline
    expect(stored.toolCalls[0]).toMatchObject({ id: 'a', name: 'write_file', argumentsRef: { digest: sha256Digest(big), bytes: 200_000 } });
    expect(stored.toolCalls[1]).toEqual(call('b', '{}'));
    expect(stored.toolCalls[2]!.argumentsRef).toEqual({ digest: sha256Digest(mid + 'x'), bytes: 40_001 });
    expect(stored.content).toBe(mid);
    expect(stored.contentRef).toBeUndefined();
    const inline = Buffer.byteLength(stored.content ?? '') + stored.toolCalls.reduce((n, c) => n + Buffer.byteLength(c.arguments), 0);
    expect(inline).toBeLessThanOrEqual(INLINE_OUTPUT_BYTES);
    expect(await blobs.getText(sha256Digest(big))).toBe(big);
    // the output handed in is not changed
    expect(output.toolCalls[0]!.arguments).toBe(big);
  });
});

describe('OutputTexts', () => {
  it('sends the history whole, with the same item objects from one request to the next', async () => {
    const blobs = createMemoryBlobStore();
    const text = 'z'.repeat(100_000);
    const stored = await storeOutput({ content: text, toolCalls: [] }, blobs);
    const item: HistoryItem = { role: 'assistant', content: stored.content, toolCalls: [], contentRef: stored.contentRef! };
    const user: HistoryItem = { role: 'user', content: 'hi' };
    const texts = new OutputTexts(blobs);
    const first = await texts.history([user, item]);
    expect(first[0]).toBe(user);
    expect(first[1]).toEqual({ role: 'assistant', content: text, toolCalls: [] });
    const second = await texts.history([user, item, user]);
    expect(second[1]).toBe(first[1]);
  });

  it('says which blob is missing, as a store error', async () => {
    const texts = new OutputTexts(createMemoryBlobStore());
    await expect(texts.load({ digest: 'sha256:00', bytes: 5 })).rejects.toMatchObject({ code: 'store.blob_missing' });
    expect(() => texts.argumentsOf({ arguments: 'preview', argumentsRef: { digest: 'sha256:00', bytes: 5 } })).toThrow(/was not loaded/);
    expect(texts.argumentsOf({ arguments: '{}' })).toBe('{}');
  });

  it('names the event of the log that names a missing blob, and says it is final', async () => {
    const texts = new OutputTexts(createMemoryBlobStore(), {
      actorId: 'agt_x', find: async (digest) => (digest === 'sha256:01' ? { actorId: 'agt_x', type: 'tool/call', seq: 9 } : null),
    });
    const err = await texts.load({ digest: 'sha256:01', bytes: 70_000 }).then(() => null, (e: unknown) => e as StoreError);
    expect(err).toMatchObject({ code: 'store.blob_missing', retryable: false });
    expect(err!.message).toBe('blob sha256:01 (68.4 KiB of model output) named by tool/call seq 9 of agt_x is not in the blob store');
    expect(err!.userMessage()).toMatch(/\. this is final: the log alone cannot rebuild it; the blob store lost it: /);
    // no event found: the agent's log is named
    expect((await texts.load({ digest: 'sha256:02', bytes: 5 }).then(() => null, (e: unknown) => e as StoreError))!.message).toMatch(/ named by the log of agt_x is not/);
  });
});

describe('helpers', () => {
  it('cuts long strings deep in a value and leaves the rest', () => {
    const ref = { digest: 'sha256:ab', bytes: 9000 };
    const out = clipStrings({ path: 'a.txt', content: 'c'.repeat(9000), n: 3, list: ['d'.repeat(5000)] }, ref) as Record<string, unknown>;
    expect(out.path).toBe('a.txt');
    expect(out.n).toBe(3);
    expect(String(out.content)).toMatch(/^c{2048}… \[9000 bytes; the call's arguments are blob sha256:ab\]$/);
    expect(String((out.list as string[])[0])).toMatch(/^d{2048}… \[5000 bytes/);
  });

  it('takes the cap from the config a turn started with, else the default', () => {
    const s = (config?: Record<string, unknown>) => ({ config }) as unknown as TurnSettings;
    expect(maxOutputBytesOf(s({ maxModelOutputBytes: 4096 }))).toBe(4096);
    expect(maxOutputBytesOf(s())).toBe(8 * 1024 * 1024);
    expect(maxOutputBytesOf(s({ maxModelOutputBytes: 'lots' }))).toBe(8 * 1024 * 1024);
  });
});
