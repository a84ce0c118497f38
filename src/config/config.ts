import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../protocol/errors.js';
import { readConfigFile, type ConfigFile } from './config-file.js';

/**
 * The frozen settings a command runs with (design §12): the workspace's `actorloop.toml`, then the
 * user's `~/.config/actorloop/config.toml`, then the environment, then flags; each later one wins.
 * The user's file wins over the workspace's on purpose: a cloned repository must not be able to
 * point the user's API key at another server.
 */
export const EffectiveConfigSchema = z.object({
  dataDir: z.string(),
  natsUrl: z.string().nullable(),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  faults: z.string().nullable(),
  /** The model a run uses when `--model` is not given, from ACTORLOOP_MODEL. */
  defaultModel: z.string().nullable(),
  /** The name (never the value) of the environment variable holding the API key, when it is set. */
  apiKeyEnv: z.string().nullable(),
  /** Config files that were read, in order. */
  configFiles: z.array(z.string()),
  /** Model capabilities from the config files, over the adapters' built-in table. */
  capabilities: z.record(
    z.string(),
    z.object({
      contextWindow: z.number().optional(),
      maxOutputTokens: z.number().optional(),
      parallelToolCalls: z.boolean().optional(),
      structuredOutput: z.boolean().optional(),
      vision: z.boolean().optional(),
    }),
  ),
  /** Model prices from the config files (USD per million tokens), over the built-in ones. */
  pricing: z.record(z.string(), z.object({ inputPerMTok: z.number(), outputPerMTok: z.number() })),
  /** OPENAI_BASE_URL: an OpenAI-compatible endpoint for `openai:` models. */
  openaiBaseUrl: z.string().nullable(),
  snapshotEvery: z.number().int().positive(),
  /** The nats-server binary of the embedded server (ACTORLOOP_NATS_SERVER); null: look it up. */
  natsServerBinary: z.string().nullable(),
});
/** The frozen settings a command runs with. */
export type EffectiveConfig = Readonly<z.infer<typeof EffectiveConfigSchema>>;

/** Flags that override the environment. */
export interface ConfigFlags {
  dataDir?: string;
  nats?: string;
  fault?: string;
  /** The workspace, where `actorloop.toml` is looked for (default: the current directory). */
  cwd?: string;
}

/** Where the config files of a workspace and a user are. */
export function configFilePaths(cwd: string, env: NodeJS.ProcessEnv): { workspace: string; user: string } {
  const base = env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME !== '' ? env.XDG_CONFIG_HOME : join(env.HOME || homedir(), '.config');
  return { workspace: join(resolve(cwd), 'actorloop.toml'), user: join(base, 'actorloop', 'config.toml') };
}

/** Default data dir: `$XDG_DATA_HOME/actorloop`, else `~/.local/share/actorloop`. */
function defaultDataDir(env: NodeJS.ProcessEnv): string {
  const base = env.XDG_DATA_HOME && env.XDG_DATA_HOME !== '' ? env.XDG_DATA_HOME : join(env.HOME || homedir(), '.local', 'share');
  return join(base, 'actorloop');
}

/**
 * Builds the EffectiveConfig. This is the one place that reads `process.env`; everything else
 * receives the frozen result. API keys are recorded by variable name only.
 */
export function loadConfig(flags: ConfigFlags, env: NodeJS.ProcessEnv = process.env): EffectiveConfig {
  const level = (env.ACTORLOOP_LOG ?? 'warn').toLowerCase();
  const paths = configFilePaths(flags.cwd ?? process.cwd(), env);
  const files: string[] = [];
  const file: ConfigFile = {};
  for (const path of [paths.workspace, paths.user]) {
    const read = readConfigFile(path);
    if (!read) continue;
    files.push(path);
    Object.assign(file, read);
  }
  const keyEnv = file.api_key_env ?? 'OPENAI_API_KEY';
  const parsed = EffectiveConfigSchema.safeParse({
    dataDir: resolve(flags.dataDir ?? (env.ACTORLOOP_DATA_DIR || file.data_dir || defaultDataDir(env))),
    natsUrl: flags.nats ?? (env.NATS_URL || file.nats_url || null),
    logLevel: level,
    faults: [flags.fault, env.ACTORLOOP_FAULTS].filter((x) => x && x !== '').join(',') || null,
    defaultModel: env.ACTORLOOP_MODEL || file.model || null,
    apiKeyEnv: env[keyEnv] ? keyEnv : null,
    configFiles: files,
    capabilities: Object.fromEntries(
      Object.entries(file.capabilities ?? {}).map(([model, c]) => [
        model,
        JSON.parse(
          JSON.stringify({
            contextWindow: c.context_window,
            maxOutputTokens: c.max_output_tokens,
            parallelToolCalls: c.parallel_tool_calls,
            structuredOutput: c.structured_output,
            vision: c.vision,
          }),
        ) as Record<string, number | boolean>,
      ]),
    ),
    pricing: Object.fromEntries(
      Object.entries(file.pricing ?? {}).map(([model, p]) => [model, { inputPerMTok: p.input_per_mtok, outputPerMTok: p.output_per_mtok }]),
    ),
    openaiBaseUrl: env.OPENAI_BASE_URL || file.base_url || null,
    snapshotEvery: Number(env.ACTORLOOP_SNAPSHOT_EVERY ?? 64),
    natsServerBinary: env.ACTORLOOP_NATS_SERVER || null,
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.join('.');
    const hint =
      field === 'logLevel'
        ? 'set ACTORLOOP_LOG to one of fatal, error, warn, info, debug, trace, silent'
        : 'check the flag or environment variable that sets it';
    throw new ConfigError('config.invalid', `invalid setting ${field}: ${issue.message}`, { hint });
  }
  const config = { ...parsed.data };
  // The key itself rides along out of sight: not enumerable, so no log, event or JSON of the
  // config ever carries it; the model factory reads it by the variable's name.
  Object.defineProperty(config, SECRETS, { value: Object.freeze({ OPENAI_API_KEY: env[keyEnv] ?? '' }), enumerable: false });
  return Object.freeze(config);
}

const SECRETS = Symbol('actorloop.secrets');

/** The API key, read from the variable the config names (OPENAI_API_KEY unless `api_key_env` says otherwise); '' when unset. */
export function secretOf(config: EffectiveConfig, name: 'OPENAI_API_KEY'): string {
  const secrets = (config as unknown as Record<symbol, Record<string, string> | undefined>)[SECRETS];
  return secrets?.[name] ?? '';
}

/** True when ACTORLOOP_LOG asks for debug output (stack traces on errors). */
export function debugEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  const level = (env.ACTORLOOP_LOG ?? '').toLowerCase();
  return level === 'debug' || level === 'trace';
}
