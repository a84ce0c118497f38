import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { tempDir } from '../helpers/nats.js';

/** A workspace and a config home holding the given files, and an environment pointing at them. */
export interface ConfigSetup {
  root: string;
  ws: string;
  home: string;
  env: NodeJS.ProcessEnv;
  userFile: string;
  wsFile: string;
}

/** `setup` for one test file's config tests; their temp dirs are removed after each test. */
export function configFixture(): (files: { workspace?: string; user?: string }, env?: NodeJS.ProcessEnv) => Promise<ConfigSetup> {
  const dirs: string[] = [];
  afterEach(async () => {
    await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
  });
  return async (files, extra = {}) => {
    const root = await tempDir('config');
    dirs.push(root);
    const ws = join(root, 'ws');
    const home = join(root, 'home');
    await mkdir(ws);
    await mkdir(join(home, 'actorloop'), { recursive: true });
    const userFile = join(home, 'actorloop', 'config.toml');
    const wsFile = join(ws, 'actorloop.toml');
    if (files.workspace !== undefined) await writeFile(wsFile, files.workspace);
    if (files.user !== undefined) await writeFile(userFile, files.user);
    return { root, ws, home, env: { XDG_CONFIG_HOME: home, HOME: root, ...extra }, userFile, wsFile };
  };
}
