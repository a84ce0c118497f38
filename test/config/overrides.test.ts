// `-c key=value`: TOML values (else a plain string), dotted keys into tables, a "did you mean" for
// a typo, the keys it refuses, and where it sits among the layers (over the files and the environment).
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { closestNames, didYouMean, editDistance } from '../../src/config/did-you-mean.js';
import { keyPath, overrideValue, parseOverrides } from '../../src/config/overrides.js';
import { ConfigError } from '../../src/protocol/errors.js';
import { configFixture } from './config-fixture.js';

const setup = configFixture();

/** The user-facing message of what `fn` throws; fails the test when it throws nothing or not a ConfigError. */
function messageOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).userMessage();
  }
  throw new Error('expected a ConfigError');
}

describe('-c values', () => {
  it('are TOML when they parse as TOML, else the string as written', () => {
    expect(overrideValue('"deny-all"')).toBe('deny-all');
    // what the shell leaves of -c approval_mode="deny-all": not TOML, so a string
    expect(overrideValue('deny-all')).toBe('deny-all');
    expect(overrideValue('4')).toBe(4);
    expect(overrideValue('2.5')).toBe(2.5);
    expect(overrideValue('true')).toBe(true);
    expect(overrideValue('["X", "Y"]')).toEqual(['X', 'Y']);
    expect(overrideValue('{ context_window = 8192 }')).toEqual({ context_window: 8192 });
    expect(overrideValue('Be terse. Answer in English.')).toBe('Be terse. Answer in English.');
    expect(overrideValue('')).toBe('');
  });

  it('set the keys they name, typed by the schema', () => {
    expect(parseOverrides(['approval_mode=deny-all', 'max_parallel_calls=4', 'redact_env=["X"]'])).toEqual({
      approval_mode: 'deny-all', max_parallel_calls: 4, redact_env: ['X'],
    });
    // a later one wins
    expect(parseOverrides(['approval_mode=ask', 'approval_mode="full-auto"'])).toEqual({ approval_mode: 'full-auto' });
    // a value with an = in it keeps it
    expect(parseOverrides(['instructions=a=b'])).toEqual({ instructions: 'a=b' });
  });

  it('reach into tables with dotted keys, quoted where a name holds a dot', () => {
    expect(keyPath('capabilities.llama3.context_window', 'x')).toEqual(['capabilities', 'llama3', 'context_window']);
    expect(keyPath('pricing."gpt-4.1".input_per_mtok', 'x')).toEqual(['pricing', 'gpt-4.1', 'input_per_mtok']);
    expect(keyPath("pricing.'a=b'.input_per_mtok", 'x')).toEqual(['pricing', 'a=b', 'input_per_mtok']);
    expect(parseOverrides([
      'capabilities.llama3.context_window=8192',
      'capabilities.llama3.vision=true',
      'pricing."gpt-4.1".input_per_mtok=2',
      'pricing."gpt-4.1".output_per_mtok=8',
    ])).toEqual({
      capabilities: { llama3: { context_window: 8192, vision: true } },
      pricing: { 'gpt-4.1': { input_per_mtok: 2, output_per_mtok: 8 } },
    });
  });

  it('refuse what is not key=value, a bad value, and the keys only `actorloop trust` writes', () => {
    expect(messageOf(() => parseOverrides(['approval_mode']))).toMatch(/-c approval_mode: expected key=value/);
    expect(messageOf(() => parseOverrides(['a..b=1']))).toMatch(/"a\.\.b" is not a config key/);
    expect(messageOf(() => parseOverrides(['approval_mode=sometimes']))).toMatch(/^-c: approval_mode: /);
    expect(messageOf(() => parseOverrides(['max_parallel_calls=four']))).toMatch(/max_parallel_calls: .*number.*a value that is not TOML is taken as a string/);
    expect(messageOf(() => parseOverrides(['workspaces."/tmp".trusted=true']))).toMatch(/workspaces is not set with -c\. trust a workspace with `actorloop trust <dir>`/);
  });
});

describe('did you mean', () => {
  it('measures edits as commander does, a swap of neighbours counting one', () => {
    expect(editDistance('approval_mode', 'approval_mode')).toBe(0);
    expect(editDistance('aproval_mode', 'approval_mode')).toBe(1);
    expect(editDistance('apporval_mode', 'approval_mode')).toBe(1);
    expect(editDistance('modle', 'model')).toBe(1);
    expect(editDistance('', 'abc')).toBe(3);
  });

  it('suggests the closest key when it is close enough, nothing for a word unlike any', () => {
    const keys = ['model', 'approval_mode', 'approval_ttl_seconds', 'max_parallel_calls'];
    expect(closestNames('aproval_mode', keys)).toEqual(['approval_mode']);
    expect(didYouMean('max_paralel_calls', keys)).toBe(' (did you mean max_parallel_calls?)');
    expect(didYouMean('colour', keys)).toBe('');
  });

  it('comes with an unknown key of -c, at the top level and inside a table', () => {
    expect(messageOf(() => parseOverrides(['aproval_mode=deny-all']))).toMatch(/unknown key aproval_mode \(did you mean approval_mode\?\)/);
    expect(messageOf(() => parseOverrides(['capabilities.llama3.contex_window=8192'])))
      .toMatch(/unknown key capabilities\.llama3\.contex_window \(did you mean context_window\?\)\. the keys of capabilities\.llama3 are context_window, /);
  });

  it('comes with an unknown key of a config file too', async () => {
    const { ws, env } = await setup({ workspace: 'aproval_mode = "ask"\n' });
    expect(messageOf(() => loadConfig({ cwd: ws }, env))).toMatch(/actorloop\.toml: unknown key aproval_mode \(did you mean approval_mode\?\)/);
  });
});

describe('the -c layer', () => {
  it('wins over the workspace file, the user file and the environment', async () => {
    const { ws, env } = await setup(
      { workspace: 'approval_mode = "deny-all"\nmodel = "openai:ws"\n', user: 'approval_mode = "auto-edit"\nmax_parallel_calls = 2\n' },
      { ACTORLOOP_MODEL: 'openai:env', ACTORLOOP_DATA_DIR: '/tmp/env-data' },
    );
    const files = loadConfig({ cwd: ws }, env);
    expect([files.approvalMode, files.defaultModel, files.maxParallelCalls, files.dataDir]).toEqual(['deny-all', 'openai:env', 2, '/tmp/env-data']);
    const c = loadConfig({ cwd: ws, overrides: ['approval_mode=ask', 'model=openai:flag', 'max_parallel_calls=5', 'data_dir=/tmp/flag-data'] }, env);
    expect([c.approvalMode, c.defaultModel, c.maxParallelCalls, c.dataDir]).toEqual(['ask', 'openai:flag', 5, '/tmp/flag-data']);
    // --data-dir, the flag named for it, wins over -c data_dir
    expect(loadConfig({ cwd: ws, dataDir: '/tmp/named', overrides: ['data_dir=/tmp/flag-data'] }, env).dataDir).toBe('/tmp/named');
  });

  it('merges tables key by key and adds to lists, as the files do', async () => {
    const { ws, env } = await setup({
      user: 'redact_env = ["A"]\n[capabilities.other]\ncontext_window = 1000\n[pricing."gpt-4.1"]\ninput_per_mtok = 1\noutput_per_mtok = 4\n'
        + '[[policy.rules]]\ntool = "shell"\ndecision = "deny"\n',
    });
    const c = loadConfig({
      cwd: ws,
      overrides: ['capabilities.llama3.context_window=8192', 'pricing."gpt-4.1".input_per_mtok=2', 'redact_env=["B"]', 'policy.rules=[{ tool = "write_file", decision = "ask" }]'],
    }, env);
    expect(c.capabilities).toEqual({ other: { contextWindow: 1000 }, llama3: { contextWindow: 8192 } });
    // the file's output price stands beside the flag's input price
    expect(c.pricing['gpt-4.1']).toEqual({ inputPerMTok: 2, outputPerMTok: 4 });
    expect(c.redactEnv).toEqual(expect.arrayContaining(['A', 'B']));
    // a -c adds a rule; it cannot take the file's deny rule away
    expect(c.policyRules.map((r) => [r.tool, r.decision])).toEqual([['shell', 'deny'], ['write_file', 'ask']]);
    // a price needs both halves: one from neither a file nor -c is missing
    expect(messageOf(() => loadConfig({ cwd: ws, overrides: ['pricing."gpt-5.1".input_per_mtok=2'] }, env)))
      .toMatch(/-c: pricing\."gpt-5\.1"\.output_per_mtok is missing/);
  });

  it('records where each value came from: default, workspace file, user file, environment, flag', async () => {
    const { ws, env } = await setup(
      { workspace: 'model = "openai:ws"\nmax_parallel_calls = 3\ninstructions = "From the repo."\n', user: 'approval_mode = "auto-edit"\nbase_url = "http://user:1/v1"\n' },
      { ACTORLOOP_DATA_DIR: '/tmp/env-data', NATS_URL: 'nats://127.0.0.1:4999' },
    );
    const c = loadConfig({ cwd: ws, overrides: ['ask_ttl_seconds=60'], nats: 'nats://127.0.0.1:4888' }, env);
    expect(c.sources).toMatchObject({
      model: 'workspace', max_parallel_calls: 'workspace', instructions: 'workspace',
      approval_mode: 'user', base_url: 'user',
      data_dir: 'env', nats_url: 'flag', ask_ttl_seconds: 'flag',
      approval_ttl_seconds: 'default', policy: 'default', capabilities: 'default', api_key_env: 'default',
    });
    expect(c.instructions).toBe('From the repo.');
    // a workspace's stricter run mode wins over the user's, and is named as the source
    const stricter = await setup({ workspace: 'approval_mode = "deny-all"\n', user: 'approval_mode = "auto-edit"\n' });
    expect(loadConfig({ cwd: stricter.ws }, stricter.env).sources.approval_mode).toBe('workspace');
    expect(loadConfig({ cwd: stricter.ws }, { ...stricter.env }).sources.data_dir).toBe('default');
  });
});
