// AGENTS.md collection on a real filesystem: the hierarchy, the fallback name, and hostile files.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { collectProjectDocs, docsForPath, projectDocText, projectRoot, type ProjectDoc } from '../../src/knowledge/project-docs.js';

let tmp: string;
let repo: string;
let user: string;

beforeEach(async () => {
  // realpath: the temp dir may itself sit behind a symlink (macOS /var)
  tmp = await realpath(await mkdtemp(join(tmpdir(), 'actorloop-docs-')));
  repo = join(tmp, 'repo');
  user = join(tmp, 'config', 'actorloop');
  await mkdir(join(repo, '.git'), { recursive: true });
  await mkdir(user, { recursive: true });
});

afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

async function put(path: string, text: string | Buffer): Promise<void> {
  await mkdir(join(path, '..'), { recursive: true });
  await writeFile(path, text);
}

function sha(text: string): string {
  return `sha256:${createHash('sha256').update(text).digest('hex')}`;
}

describe('projectRoot', () => {
  it('is the nearest ancestor holding .git, a directory or a worktree file', async () => {
    await mkdir(join(repo, 'a', 'b'), { recursive: true });
    expect(projectRoot(join(repo, 'a', 'b'))).toBe(repo);
    expect(projectRoot(repo)).toBe(repo);
    await put(join(repo, 'a', '.git'), 'gitdir: /elsewhere/.git/worktrees/a\n');
    expect(projectRoot(join(repo, 'a', 'b'))).toBe(join(repo, 'a'));
  });

  it('is the directory itself when no ancestor holds .git', async () => {
    const plain = join(tmp, 'plain', 'deep');
    await mkdir(plain, { recursive: true });
    // the temp dir's own ancestors hold no .git on a test machine; say so if one does
    expect(projectRoot(plain)).toBe(plain);
  });
});

describe('collectProjectDocs', () => {
  it('gives the user doc first, then the root down to the working directory, broad to narrow', async () => {
    await put(join(user, 'AGENTS.md'), 'user rules\n');
    await put(join(repo, 'AGENTS.md'), 'root rules\n');
    await put(join(repo, 'a', 'AGENTS.md'), 'a rules\n');
    await mkdir(join(repo, 'a', 'b'), { recursive: true });
    // deeper than the working directory: not collected
    await put(join(repo, 'a', 'b', 'c', 'AGENTS.md'), 'c rules\n');
    const { docs, warnings } = await collectProjectDocs({ cwd: join(repo, 'a', 'b'), userConfigDir: user });
    expect(warnings).toEqual([]);
    expect(docs.map((d) => [d.scope, d.path, d.dir, d.content])).toEqual([
      ['user', join(user, 'AGENTS.md'), user, 'user rules\n'],
      ['project', join(repo, 'AGENTS.md'), repo, 'root rules\n'],
      ['project', join(repo, 'a', 'AGENTS.md'), join(repo, 'a'), 'a rules\n'],
    ]);
    expect(docs[1]).toMatchObject({ digest: sha('root rules\n'), bytes: 11, truncated: false });
  });

  it('without a user config dir or a doc there, gives only the project docs', async () => {
    await put(join(repo, 'AGENTS.md'), 'root\n');
    expect((await collectProjectDocs({ cwd: repo, userConfigDir: null })).docs.map((d) => d.scope)).toEqual(['project']);
    expect((await collectProjectDocs({ cwd: repo, userConfigDir: user })).docs.map((d) => d.scope)).toEqual(['project']);
  });

  it('falls back to CLAUDE.md where a directory has no AGENTS.md, and prefers AGENTS.md where it has both', async () => {
    await put(join(repo, 'CLAUDE.md'), 'claude root\n');
    await put(join(repo, 'a', 'AGENTS.md'), 'agents a\n');
    await put(join(repo, 'a', 'CLAUDE.md'), 'claude a\n');
    const { docs } = await collectProjectDocs({ cwd: join(repo, 'a'), userConfigDir: null });
    expect(docs.map((d) => d.content)).toEqual(['claude root\n', 'agents a\n']);
    const custom = await collectProjectDocs({ cwd: join(repo, 'a'), userConfigDir: null, names: ['CLAUDE.md'] });
    expect(custom.docs.map((d) => d.content)).toEqual(['claude root\n', 'claude a\n']);
  });

  it('skips a symlink resolving outside the project root with a warning, and takes the next name', async () => {
    await put(join(tmp, 'secret.md'), 'not for the model\n');
    await symlink(join(tmp, 'secret.md'), join(repo, 'AGENTS.md'));
    await put(join(repo, 'CLAUDE.md'), 'fallback\n');
    // a symlink that stays inside the root is an ordinary doc
    await put(join(repo, 'docs', 'shared.md'), 'shared rules\n');
    await mkdir(join(repo, 'a'));
    await symlink('../docs/shared.md', join(repo, 'a', 'AGENTS.md'));
    const { docs, warnings } = await collectProjectDocs({ cwd: join(repo, 'a'), userConfigDir: null });
    expect(docs.map((d) => d.content)).toEqual(['fallback\n', 'shared rules\n']);
    expect(warnings).toEqual([`${join(repo, 'AGENTS.md')} skipped: it resolves to ${join(tmp, 'secret.md')}, outside ${repo}`]);
    expect(docs.some((d) => d.content.includes('not for the model'))).toBe(false);
  });

  it('skips a user doc that is a symlink out of the user config dir', async () => {
    await put(join(tmp, 'elsewhere.md'), 'elsewhere\n');
    await symlink(join(tmp, 'elsewhere.md'), join(user, 'AGENTS.md'));
    const { docs, warnings } = await collectProjectDocs({ cwd: repo, userConfigDir: user });
    expect(docs).toEqual([]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(`outside ${user}`);
  });

  it('skips a directory, a FIFO and a dangling symlink named AGENTS.md without hanging', async () => {
    await mkdir(join(repo, 'AGENTS.md'));
    await mkdir(join(repo, 'a'));
    execFileSync('mkfifo', [join(repo, 'a', 'AGENTS.md')]);
    await mkdir(join(repo, 'a', 'b'));
    await symlink(join(repo, 'nowhere.md'), join(repo, 'a', 'b', 'AGENTS.md'));
    const { docs, warnings } = await collectProjectDocs({ cwd: join(repo, 'a', 'b'), userConfigDir: null });
    expect(docs).toEqual([]);
    expect(warnings).toEqual([
      `${join(repo, 'AGENTS.md')} skipped: it is a directory, not a regular file`,
      `${join(repo, 'a', 'AGENTS.md')} skipped: it is a FIFO, not a regular file`,
      expect.stringMatching(/b\/AGENTS\.md skipped: it is a symlink that resolves nowhere/),
    ]);
  });

  it('skips non-UTF-8 and NUL-holding files with a warning', async () => {
    await put(join(repo, 'AGENTS.md'), Buffer.from([0x68, 0x69, 0xff, 0xfe, 0x0a]));
    await put(join(repo, 'a', 'AGENTS.md'), 'text\u0000more\n');
    const { docs, warnings } = await collectProjectDocs({ cwd: join(repo, 'a'), userConfigDir: null });
    expect(docs).toEqual([]);
    expect(warnings).toEqual([
      `${join(repo, 'AGENTS.md')} skipped: it is not UTF-8 text`,
      `${join(repo, 'a', 'AGENTS.md')} skipped: it holds NUL bytes (a binary file, not text)`,
    ]);
  });

  it('reads at most maxFileBytes, cut at a character boundary, and marks the doc truncated', async () => {
    // 9 ASCII bytes, then é (2 bytes) straddling the 10-byte limit
    await put(join(repo, 'AGENTS.md'), 'abcdefghi\u00e9 and more after the limit\n');
    await put(join(repo, 'a', 'AGENTS.md'), '0123456789');
    const { docs } = await collectProjectDocs({ cwd: join(repo, 'a'), userConfigDir: null, maxFileBytes: 10 });
    expect(docs[0]).toMatchObject({ content: 'abcdefghi', bytes: 9, truncated: true, digest: sha('abcdefghi') });
    // exactly the limit is whole
    expect(docs[1]).toMatchObject({ content: '0123456789', bytes: 10, truncated: false });
    expect(projectDocText(docs[0]!, repo)).toContain('[AGENTS.md was cut here: only its first 9 bytes are shown]');
    expect(projectDocText(docs[1]!, repo)).not.toContain('was cut');
  });
});

describe('docsForPath', () => {
  it('gives the docs of deeper directories not yet known, broad to narrow', async () => {
    await put(join(repo, 'AGENTS.md'), 'root\n');
    await put(join(repo, 'a', 'AGENTS.md'), 'a\n');
    await put(join(repo, 'a', 'b', 'CLAUDE.md'), 'b\n');
    await put(join(repo, 'a', 'b', 'c', 'AGENTS.md'), 'c\n');
    await mkdir(join(repo, 'a', 'b', 'c', 'd'), { recursive: true });
    const start = await collectProjectDocs({ cwd: repo, userConfigDir: null });
    const known = new Set(start.docs.map((d) => d.path));
    const found = await docsForPath({ root: repo, path: join(repo, 'a', 'b', 'c', 'd', 'main.ts'), known });
    expect(found.docs.map((d) => d.path)).toEqual([join(repo, 'a', 'AGENTS.md'), join(repo, 'a', 'b', 'CLAUDE.md'), join(repo, 'a', 'b', 'c', 'AGENTS.md')]);
    expect(found.warnings).toEqual([]);
    // once they are known, the same path adds nothing; a relative path is taken from the root
    const all = new Set([...known, ...found.docs.map((d) => d.path)]);
    expect((await docsForPath({ root: repo, path: 'a/b/c/d/main.ts', known: all })).docs).toEqual([]);
    expect((await docsForPath({ root: repo, path: 'a/b/c/other.ts', known })).docs.map((d) => d.content)).toEqual(['a\n', 'b\n', 'c\n']);
  });

  it('gives none for a path outside the root', async () => {
    await put(join(tmp, 'outside', 'AGENTS.md'), 'outside\n');
    expect((await docsForPath({ root: repo, path: join(tmp, 'outside', 'x.ts'), known: new Set() })).docs).toEqual([]);
    expect((await docsForPath({ root: repo, path: '../outside/x.ts', known: new Set() })).docs).toEqual([]);
  });

  it('skips a deeper doc that links out of the root, with a warning', async () => {
    await put(join(tmp, 'secret.md'), 'secret\n');
    await mkdir(join(repo, 'a'));
    await symlink(join(tmp, 'secret.md'), join(repo, 'a', 'AGENTS.md'));
    const found = await docsForPath({ root: repo, path: join(repo, 'a', 'f.ts'), known: new Set() });
    expect(found.docs).toEqual([]);
    expect(found.warnings).toEqual([`${join(repo, 'a', 'AGENTS.md')} skipped: it resolves to ${join(tmp, 'secret.md')}, outside ${repo}`]);
  });
});

describe('projectDocText', () => {
  const doc = (over: Partial<ProjectDoc>): ProjectDoc => ({
    path: '/r/AGENTS.md', dir: '/r', scope: 'project', content: 'Use pnpm.', digest: sha('Use pnpm.'), bytes: 9, truncated: false, ...over,
  });

  it('names the file relative to the root and what it applies to, the same way each time', () => {
    expect(projectDocText(doc({}), '/r')).toBe(
      'Project instructions from AGENTS.md (they apply to the whole project; a file deeper in the tree refines these):\n\nUse pnpm.\n');
    expect(projectDocText(doc({ path: '/r/pkg/web/CLAUDE.md', dir: '/r/pkg/web', content: 'Run vite.\n' }), '/r')).toBe(
      'Project instructions from pkg/web/CLAUDE.md (they apply to files under pkg/web/; a file deeper in the tree refines these):\n\nRun vite.\n');
    expect(projectDocText(doc({ path: '/home/u/.config/actorloop/AGENTS.md', dir: '/home/u/.config/actorloop', scope: 'user', content: 'Be brief.\n' }), '/r')).toBe(
      'User instructions (AGENTS.md in the user\'s actorloop config dir; they apply to every project):\n\nBe brief.\n');
  });
});
