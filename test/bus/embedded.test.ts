import { afterAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { rm, writeFile, mkdir, readFile } from 'node:fs/promises';
import { acquireEmbeddedNats, embeddedPaths, readEmbeddedState } from '../../src/bus/embedded.js';
import { natsAccepts } from '../../src/bus/nats-server.js';
import { tempDir } from '../helpers/nats.js';

describe('acquireEmbeddedNats', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('starts once, is reused while it lives, and is stopped by its last user', async () => {
    const dataDir = await tempDir('emb');
    dirs.push(dataDir);
    const paths = embeddedPaths(dataDir);
    const owner = await acquireEmbeddedNats(dataDir);
    try {
      expect(owner.owned).toBe(true);
      const state = await readEmbeddedState(paths.stateFile);
      expect(state?.url).toBe(owner.url);
      expect(existsSync(paths.storeDir)).toBe(true);

      const user = await acquireEmbeddedNats(dataDir);
      expect(user.owned).toBe(false);
      expect(user.url).toBe(owner.url);
      await user.release(); // this process still uses it through the owner
      expect(await natsAccepts(owner.url)).toBe(true);
    } finally {
      await owner.release();
    }
    expect(await natsAccepts(owner.url, 300)).toBe(false);
    expect(existsSync(paths.stateFile)).toBe(false);
    expect(existsSync(paths.lockFile)).toBe(false);
  });

  it('serializes concurrent starts: one owner, the others reuse', async () => {
    const dataDir = await tempDir('emb-race');
    dirs.push(dataDir);
    const all = await Promise.all([1, 2, 3].map(() => acquireEmbeddedNats(dataDir)));
    try {
      expect(all.filter((e) => e.owned)).toHaveLength(1);
      expect(new Set(all.map((e) => e.url)).size).toBe(1);
    } finally {
      for (const e of all) await e.release();
    }
  });

  it('ignores a state file of a dead server and breaks a stale lock', async () => {
    const dataDir = await tempDir('emb-stale');
    dirs.push(dataDir);
    const paths = embeddedPaths(dataDir);
    await mkdir(paths.dir, { recursive: true });
    // pid 2^22-1 is above the default pid_max on Linux: never alive
    const deadPid = 4_194_303;
    await writeFile(paths.stateFile, JSON.stringify({ pid: deadPid, url: 'nats://127.0.0.1:1', startedAt: 'x' }));
    await writeFile(paths.lockFile, String(deadPid));
    const e = await acquireEmbeddedNats(dataDir, undefined, { lockTimeoutMs: 5_000 });
    try {
      expect(e.owned).toBe(true);
      expect(await natsAccepts(e.url)).toBe(true);
      expect(JSON.parse(await readFile(paths.stateFile, 'utf8')).url).toBe(e.url);
    } finally {
      await e.release();
    }
  });
});
