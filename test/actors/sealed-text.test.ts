import { describe, expect, it } from 'vitest';
import { sealedText, sealText, unsealText } from '../../src/actors/agent/sealed-text.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { createMemoryBlobStore } from '../../src/store/memory-blobs.js';

describe('sealed text', () => {
  it('stores a text salted: the same text twice is two blobs, neither named by the text\'s own digest', async () => {
    const blobs = createMemoryBlobStore();
    const a = await sealText(blobs, 'hunter2');
    const b = await sealText(blobs, 'hunter2');
    expect(a.digest).not.toBe(b.digest);
    expect([a.digest, b.digest]).not.toContain(sha256Digest('hunter2'));
    expect(await unsealText(blobs, a)).toBe('hunter2');
    expect(await unsealText(blobs, b)).toBe('hunter2');
  });

  it('reads a blob an older version stored bare as it is', () => {
    expect(sealedText('The person answered: x')).toBe('The person answered: x');
    expect(sealedText('{"salt":"not json')).toBe('{"salt":"not json');
    expect(sealedText('{"salt":"ab","other":1}')).toBe('{"salt":"ab","other":1}');
  });
});
