import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { environmentOf, loadConfig, redactedValues, secretOf } from '../../src/config/config.js';
import { ConfigError } from '../../src/protocol/errors.js';
import { configFixture } from './config-fixture.js';

/** A workspace and a config home with the given files; env points at them. */
const setup = configFixture();

describe('configuration', () => {
  it('merges the workspace file, the user file, the environment and flags, later ones winning', async () => {
    const { ws, env } = await setup({
      workspace: 'model = "openai:from-workspace"\nbase_url = "http://workspace:1/v1"\n',
      user: 'base_url = "http://user:2/v1"\ndata_dir = "/tmp/user-data"\n',
    });
    const fromFiles = loadConfig({ cwd: ws }, env);
    expect(fromFiles.defaultModel).toBe('openai:from-workspace');
    // the user's file wins over the workspace's: a repository cannot redirect the user's key
    expect(fromFiles.openaiBaseUrl).toBe('http://user:2/v1');
    expect(fromFiles.dataDir).toBe('/tmp/user-data');
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
    expect((err as ConfigError).userMessage()).toMatch(/config\.toml: unknown key modle \(did you mean model\?\)\. the keys are model, base_url, api_key_env, data_dir, nats_url/);
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

  describe('policy', () => {
    const RULES = '[[policy.rules]]\ntool = "shell"\ncommand = "git push"\ndecision = "deny"\n\n[[policy.rules]]\ntool = "shell"\ncommand = "npm test"\ndecision = "allow"\n';

    it('takes the user\'s rules, and the workspace\'s deny and ask rules, but not its allow rules unless trusted', async () => {
      const { ws, env } = await setup({ workspace: RULES, user: 'approval_mode = "auto-edit"\n[[policy.rules]]\ntool = "write_file"\ndecision = "ask"\n' });
      const config = loadConfig({ cwd: ws }, env);
      expect(config.approvalMode).toBe('auto-edit');
      expect(config.policyRules.map((r) => [r.tool, r.decision])).toEqual([['write_file', 'ask'], ['shell', 'deny']]);
      expect(config.policyNotes).toEqual([expect.stringMatching(/policy rule 2 \(allow\): an untrusted workspace only adds deny and ask rules/)]);

      const { ws: ws2, env: env2 } = await setup({ workspace: RULES, user: 'trust_workspace_policy = true\n' });
      const trusted = loadConfig({ cwd: ws2 }, env2);
      expect(trusted.policyRules.map((r) => r.decision)).toEqual(['deny', 'allow']);
      expect(trusted.policyNotes).toEqual([]);
    });

    it('refuses a bad rule naming the file, the rule and the field', async () => {
      const { ws, env } = await setup({ workspace: '[[policy.rules]]\ntool = "shell"\ndecision = "deny"\nnetwork = true\n' });
      expect(() => loadConfig({ cwd: ws }, env)).toThrow(/actorloop\.toml: policy\.rules\.0\.network: network and env_allow grant something to an allowed call/);
      const { ws: ws2, env: env2 } = await setup({ workspace: '[[policy.rules]]\npaths = ["/etc/**"]\ndecision = "deny"\n' });
      expect(() => loadConfig({ cwd: ws2 }, env2)).toThrow(/policy\.rules\.0\.paths\.0: paths are globs relative to the workspace root/);
    });

    it('defaults: ask, no rules, a 16 KiB observation budget, a day to answer an approval, 8 calls at once', async () => {
      const { ws, env } = await setup({});
      const config = loadConfig({ cwd: ws }, env);
      expect(config).toMatchObject({ approvalMode: 'ask', policyRules: [], observationBudgetBytes: 16384, approvalTtlMs: 86_400_000, maxParallelCalls: 8 });
    });

    it('keeps the environment and the values to redact out of sight, like the key', async () => {
      const { ws, env } = await setup({ user: 'redact_env = ["GH_TOKEN"]\n' });
      const config = loadConfig({ cwd: ws }, { ...env, OPENAI_API_KEY: 'sk-abcdefgh12345678', GH_TOKEN: 'ghp_secretvalue123', PATH: '/usr/bin' });
      expect(redactedValues(config).sort()).toEqual(['ghp_secretvalue123', 'sk-abcdefgh12345678']);
      expect(environmentOf(config).PATH).toBe('/usr/bin');
      expect(JSON.stringify(config)).not.toContain('ghp_secretvalue123');
      expect(config.redactEnv).toEqual(['OPENAI_API_KEY', 'NATS_PASSWORD', 'NATS_TOKEN', 'GH_TOKEN']);
    });
  });
});
