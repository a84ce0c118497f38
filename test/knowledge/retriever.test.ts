import { createHash } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { estimateTokens, mergeRanges } from '../../src/knowledge/retriever.js';
import { createRipgrepRetriever } from '../../src/knowledge/ripgrep-retriever.js';
import { ToolError } from '../../src/protocol/errors.js';

let root: string;
let repo: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'actorloop-retriever-'));
  repo = join(root, 'repo');
  await mkdir(join(repo, 'src'), { recursive: true });
  await mkdir(join(repo, 'docs'));
  await writeFile(join(repo, 'src', 'lease.ts'), [
    'import { clock } from "./clock.js";', '', '/** A lease held by one host. */', 'export class Lease {',
    '  renew(): void {', '    // the lease is renewed before its deadline', '  }', '}', '',
  ].join('\n'));
  await writeFile(join(repo, 'docs', 'notes.md'), ['# Notes', '', 'Nothing about it here.', 'A deadline is a deadline.', ''].join('\n'));
  await writeFile(join(repo, 'src', 'other.ts'), `${Array.from({ length: 60 }, (_, i) => `const lease${i} = ${i};`).join('\n')}\n`);
});
afterEach(async () => {
  delete process.env.RIPGREP_CONFIG_PATH;
  await rm(root, { recursive: true, force: true });
});

const sha = (s: string) => `sha256:${createHash('sha256').update(s).digest('hex')}`;

async function refusal(p: Promise<unknown>): Promise<ToolError> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(ToolError);
  return err as ToolError;
}

describe('mergeRanges', () => {
  it('widens hits by the context and merges ranges that overlap or touch, within the file', () => {
    expect(mergeRanges([0, 3, 9], 1, 10)).toEqual([[0, 4], [8, 9]]);
    expect(mergeRanges([5], 0, 10)).toEqual([[5, 5]]);
  });
});

describe('ripgrep retriever', () => {
  it('finds excerpts with source, version and line range, best first, within the token budget', async () => {
    const r = createRipgrepRetriever({ contextLines: 1 });
    expect(r.name).toBe('ripgrep');
    const all = await r.search({ text: 'lease DEADLINE', scope: { root: repo }, tokenBudget: 100_000 });
    const text = await readFile(join(repo, 'src', 'lease.ts'), 'utf8');
    // lease.ts has both words in one range: it comes first
    expect(all[0]).toEqual({
      source: 'src/lease.ts', version: sha(text), startLine: 2, endLine: 7,
      text: ['', '/** A lease held by one host. */', 'export class Lease {', '  renew(): void {', '    // the lease is renewed before its deadline', '  }'].join('\n'),
      tokens: estimateTokens(all[0]!.text), estimated: true,
    });
    expect(all.map((e) => e.source)).toEqual(expect.arrayContaining(['docs/notes.md', 'src/other.ts']));
    // sixty matching lines in a row come as pieces of at most 40 lines
    expect(all.filter((e) => e.source === 'src/other.ts').map((e) => [e.startLine, e.endLine])).toEqual([[1, 40], [41, 60]]);
    const total = all.reduce((n, e) => n + e.tokens, 0);

    const small = await r.search({ text: 'lease deadline', scope: { root: repo }, tokenBudget: 60 });
    expect(small.reduce((n, e) => n + e.tokens, 0)).toBeLessThanOrEqual(60);
    expect(small.reduce((n, e) => n + e.tokens, 0)).toBeLessThan(total);
    expect(small[0]!.source).toBe('src/lease.ts');
    for (const e of small) expect(e.tokens).toBe(estimateTokens(e.text));
    // a scope path searches only there
    const docs = await r.search({ text: 'deadline', scope: { root: repo, paths: ['docs'] }, tokenBudget: 1000 });
    expect(docs.map((e) => [e.source, e.startLine, e.endLine])).toEqual([['docs/notes.md', 3, 4]]);
    expect(await r.search({ text: 'absent-word-xyz', scope: { root: repo }, tokenBudget: 1000 })).toEqual([]);
  });

  it('ignores a hostile .ripgreprc and RIPGREP_CONFIG_PATH: no preprocessor runs, nothing is hidden', async () => {
    const marker = join(root, 'pre-ran');
    const pre = join(repo, 'pre.sh');
    await writeFile(pre, `#!/bin/sh\ntouch ${marker}\ncat "$1"\n`);
    await chmod(pre, 0o755);
    const rc = join(repo, '.ripgreprc');
    await writeFile(rc, `--pre=${pre}\n--invert-match\n--max-count=0\n`);
    process.env.RIPGREP_CONFIG_PATH = rc;
    const found = await createRipgrepRetriever().search({ text: 'renewed', scope: { root: repo }, tokenBudget: 1000 });
    expect(found.map((e) => e.source)).toEqual(['src/lease.ts']);
    await expect(readFile(marker)).rejects.toThrow();
  });

  it('takes a query starting with - as words to find, not as flags', async () => {
    await writeFile(join(repo, 'flags.txt'), 'run it with --files and -v\n');
    const found = await createRipgrepRetriever().search({ text: '--files -v', scope: { root: repo }, tokenBudget: 1000 });
    expect(found).toEqual([expect.objectContaining({ source: 'flags.txt', startLine: 1, endLine: 1, text: 'run it with --files and -v' })]);
    const nul = await createRipgrepRetriever().search({ text: '--files\0-e', scope: { root: repo }, tokenBudget: 1000 });
    expect(nul.map((e) => e.source)).toEqual(['flags.txt']);
  });

  it('skips symlinks out of the scope and binary files, and refuses scope paths that lead outside', async () => {
    await writeFile(join(root, 'secret.txt'), 'lease secret outside\n');
    await symlink(join(root, 'secret.txt'), join(repo, 'link.txt'));
    await symlink(root, join(repo, 'up'));
    await writeFile(join(repo, 'blob.bin'), Buffer.concat([Buffer.from('lease\0\0binary')]));
    const found = await createRipgrepRetriever().search({ text: 'lease', scope: { root: repo }, tokenBudget: 100_000 });
    expect([...new Set(found.map((e) => e.source))].sort()).toEqual(['src/lease.ts', 'src/other.ts']);
    expect(found.some((e) => e.text.includes('secret'))).toBe(false);
    const r = createRipgrepRetriever();
    expect((await refusal(r.search({ text: 'lease', scope: { root: repo, paths: ['../secret.txt'] }, tokenBudget: 100 }))).code).toBe('retriever.outside_scope');
    expect((await refusal(r.search({ text: 'lease', scope: { root: repo, paths: ['up'] }, tokenBudget: 100 }))).code).toBe('retriever.outside_scope');
    expect((await refusal(r.search({ text: 'lease', scope: { root: repo, paths: ['missing'] }, tokenBudget: 100 }))).code).toBe('retriever.not_found');
  });

  it('never runs an rg planted in the scope, and says which package to install when rg is missing', async () => {
    const marker = join(root, 'planted-ran');
    await mkdir(join(repo, 'bin'));
    await writeFile(join(repo, 'bin', 'rg'), `#!/bin/sh\ntouch ${marker}\n`);
    await chmod(join(repo, 'bin', 'rg'), 0o755);
    const planted = createRipgrepRetriever({ searchPath: `${join(repo, 'bin')}:/usr/local/bin:/usr/bin:/bin` });
    expect((await planted.search({ text: 'renewed', scope: { root: repo }, tokenBudget: 1000 })).map((e) => e.source)).toEqual(['src/lease.ts']);
    await expect(readFile(marker)).rejects.toThrow();

    const onlyPlanted = createRipgrepRetriever({ searchPath: join(repo, 'bin') });
    const missing = await refusal(onlyPlanted.search({ text: 'lease', scope: { root: repo }, tokenBudget: 100 }));
    expect(missing.code).toBe('retriever.rg_missing');
    expect(missing.hint).toContain('ripgrep');
    const named = await refusal(createRipgrepRetriever({ rgPath: join(root, 'no-rg') }).search({ text: 'lease', scope: { root: repo }, tokenBudget: 100 }));
    expect(named.message).toContain(join(root, 'no-rg'));
  });

  it('stops when its signal is aborted, and returns nothing for an empty query or budget', async () => {
    const r = createRipgrepRetriever();
    const ac = new AbortController();
    ac.abort(new Error('stop now'));
    await expect(r.search({ text: 'lease', scope: { root: repo }, tokenBudget: 100 }, ac.signal)).rejects.toThrow('stop now');
    expect(await r.search({ text: '   ', scope: { root: repo }, tokenBudget: 100 })).toEqual([]);
    expect(await r.search({ text: 'lease', scope: { root: repo }, tokenBudget: 0 })).toEqual([]);
  });
});
