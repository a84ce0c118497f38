import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig, secretOf } from '../../src/config/config.js';
import { ConfigError } from '../../src/protocol/errors.js';
import { tempDir } from '../helpers/nats.js';

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A workspace and a config home with the given files; env points at them. */
async function setup(files: { workspace?: string; user?: string }) {
  const root = await tempDir('config');
  dirs.push(root);
  const ws = join(root, 'ws');
  const home = join(root, 'home');
  await mkdir(ws);
  await mkdir(join(home, 'actorloop'), { recursive: true });
  if (files.workspace !== undefined) await writeFile(join(ws, 'actorloop.toml'), files.workspace);
  if (files.user !== undefined) await writeFile(join(home, 'actorloop', 'config.toml'), files.user);
  const env: NodeJS.ProcessEnv = { XDG_CONFIG_HOME: home, HOME: root };
  return { ws, home, env };
}

describe('configuration', () => {
  it('merges the workspace file, the user file, the environment and flags, later ones winning', async () => {
    const { ws, env } = await setup({
      workspace: 'model = "openai:from-workspace"\nbase_url = "http://workspace:1/v1"\ndata_dir = "/tmp/ws-data"\n',
      user: 'base_url = "http://user:2/v1"\n',
    });
    const fromFiles = loadConfig({ cwd: ws }, env);
    expect(fromFiles.defaultModel).toBe('openai:from-workspace');
    // the user's file wins over the workspace's: a repository cannot redirect the user's key
    expect(fromFiles.openaiBaseUrl).toBe('http://user:2/v1');
    expect(fromFiles.dataDir).toBe('/tmp/ws-data');
    expect(fromFiles.configFiles).toEqual([join(ws, 'actorloop.toml'), join(env.XDG_CONFIG_HOME!, 'actorloop', 'config.toml')]);

    const fromEnv = loadConfig({ cwd: ws }, { ...env, ACTORLOOP_MODEL: 'openai:from-env', OPENAI_BASE_URL: 'http://env:3/v1', ACTORLOOP_DATA_DIR: '/tmp/env-data' });
    expect(fromEnv.defaultModel).toBe('openai:from-env');
    expect(fromEnv.openaiBaseUrl).toBe('http://env:3/v1');
    expect(loadConfig({ cwd: ws, dataDir: '/tmp/flag-data' }, { ...env, ACTORLOOP_DATA_DIR: '/tmp/env-data' }).dataDir).toBe('/tmp/flag-data');
  });

  it('reads the API key from the variable the config names, and never shows it', async () => {
    const { ws, env } = await setup({ user: 'api_key_env = "MY_GATEWAY_KEY"\n' });
    const config = loadConfig({ cwd: ws }, { ...env, MY_GATEWAY_KEY: 'sk-secret-value', OPENAI_API_KEY: 'sk-other' });
    expect(config.apiKeyEnv).toBe('MY_GATEWAY_KEY');
    expect(secretOf(config, 'OPENAI_API_KEY')).toBe('sk-secret-value');
    expect(JSON.stringify(config)).not.toContain('sk-secret-value');
    expect(JSON.stringify(config)).not.toContain('sk-other');
    expect(Object.isFrozen(config)).toBe(true);
    // no key set: no key name recorded
    expect(loadConfig({ cwd: ws }, env).apiKeyEnv).toBeNull();
  });

  it('refuses a file that is not TOML, naming the file and the line', async () => {
    const { ws, env } = await setup({ workspace: 'model = "openai:x"\nbase_url = [\n' });
    expect(() => loadConfig({ cwd: ws }, env)).toThrow(ConfigError);
    expect(() => loadConfig({ cwd: ws }, env)).toThrow(/actorloop\.toml is not valid TOML at line \d+, column \d+: Invalid TOML document/);
  });

  it('refuses unknown keys and bad values, naming the key and listing the valid ones', async () => {
    const unknown = await setup({ user: 'modle = "openai:x"\n' });
    let err: unknown;
    try {
      loadConfig({ cwd: unknown.ws }, unknown.env);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).userMessage()).toMatch(/config\.toml: unknown key modle\. the keys are model, base_url, api_key_env, data_dir, nats_url/);
    const badUrl = await setup({ workspace: 'base_url = "localhost:8000"\n' });
    expect(() => loadConfig({ cwd: badUrl.ws }, badUrl.env)).toThrow(/base_url/);
    const badEnvName = await setup({ workspace: 'api_key_env = "sk-123"\n' });
    expect(() => loadConfig({ cwd: badEnvName.ws }, badEnvName.env)).toThrow(/api_key_env/);
  });

  it('works with no config files at all', async () => {
    const { ws, env } = await setup({});
    const config = loadConfig({ cwd: ws }, env);
    expect(config.configFiles).toEqual([]);
    expect(config.defaultModel).toBeNull();
    expect(config.dataDir).toBe(join(env.HOME!, '.local', 'share', 'actorloop'));
  });
});
