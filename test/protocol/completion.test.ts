import { describe, expect, it } from 'vitest';
import { citationsOf, evidenceKey, isVerification, searchHitPaths } from '../../src/protocol/completion.js';

describe('citationsOf', () => {
  it('reads [id] markers, once each, but not Markdown links or task boxes', () => {
    const text = 'See [src/a.ts:3] and [art_0Q2V8M4K7T9H3C6X1B5N8R2W4Z], [the docs](https://x.y), [x] done, [ ] todo, again [src/a.ts:3].';
    expect(citationsOf(text, false)).toEqual(['src/a.ts:3', 'art_0Q2V8M4K7T9H3C6X1B5N8R2W4Z']);
  });

  it('reads the citations array of a structured answer: strings or objects naming id, path or source', () => {
    const answer = JSON.stringify({ summary: 'see [ignored.md]', citations: ['a.md', { path: 'b.md' }, { id: 'art_0Q2V8M4K7T9H3C6X1B5N8R2W4Z' }, { note: 1 }] });
    expect(citationsOf(answer, true)).toEqual(['a.md', 'b.md', 'art_0Q2V8M4K7T9H3C6X1B5N8R2W4Z']);
  });

  it('falls back to markers when a structured answer has no citations array', () => {
    expect(citationsOf(JSON.stringify({ summary: 'see [c.md]' }), true)).toEqual(['c.md']);
  });
});

describe('evidenceKey', () => {
  it('names one file however it is written', () => {
    for (const ref of ['src/a.ts', './src/a.ts', 'src/./b/../a.ts', '/ws/src/a.ts', 'src/a.ts:12', 'src/a.ts:12-20', 'src/a.ts#L3', 'src\\a.ts']) {
      expect(evidenceKey(ref, '/ws')).toBe('src/a.ts');
    }
  });

  it('keeps a path outside the workspace absolute, and an artifact ID as is', () => {
    expect(evidenceKey('/etc/passwd', '/ws')).toBe('/etc/passwd');
    expect(evidenceKey('/wsx/a.ts', '/ws')).toBe('/wsx/a.ts');
    expect(evidenceKey('art_0Q2V8M4K7T9H3C6X1B5N8R2W4Z', '/ws')).toBe('art_0Q2V8M4K7T9H3C6X1B5N8R2W4Z');
  });
});

describe('searchHitPaths', () => {
  it('takes the path of each match line, not the note', () => {
    expect(searchHitPaths('src/a.ts:3: export x\nsrc/a.ts:9: y\nlib/b.js:1: z\n[stopped at 200 matches; narrow the pattern or the path]')).toEqual(['src/a.ts', 'lib/b.js']);
  });
});

describe('isVerification', () => {
  const prefixes = ['npm test', 'node --test'];
  it('is a verification when every command starts with a configured prefix (cd aside)', () => {
    expect(isVerification([['npm', 'test']], prefixes)).toBe(true);
    expect(isVerification([['npm', 'test', '--', '-t', 'slug']], prefixes)).toBe(true);
    expect(isVerification([['/usr/bin/node', '--test', 'test/']], prefixes)).toBe(true);
    expect(isVerification([['cd', 'pkg'], ['npm', 'test']], prefixes)).toBe(true);
  });

  it('is not when anything else runs, the words differ, or nothing is configured', () => {
    expect(isVerification([['npm', 'test'], ['rm', '-rf', 'x']], prefixes)).toBe(false);
    expect(isVerification([['npm', 'run', 'test']], prefixes)).toBe(false);
    expect(isVerification([['node', 'test.js']], prefixes)).toBe(false);
    expect(isVerification([['cd', 'x']], prefixes)).toBe(false);
    expect(isVerification([['npm', 'test']], [])).toBe(false);
    expect(isVerification(undefined, prefixes)).toBe(false);
  });
});
