import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../protocol/errors.js';

/** The frozen settings a command runs with: flags over environment over defaults (design §12). */
export const EffectiveConfigSchema = z.object({
  dataDir: z.string(),
  natsUrl: z.string().nullable(),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  faults: z.string().nullable(),
  /** The model a run uses when `--model` is not given, from ACTORLOOP_MODEL. */
  defaultModel: z.string().nullable(),
  /** Names (never values) of the API key variables that are set. */
  apiKeyEnv: z.string().nullable(),
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
}

/** Default data dir: `$XDG_DATA_HOME/actorloop`, else `~/.local/share/actorloop`. */
function defaultDataDir(env: NodeJS.ProcessEnv): string {
  const base = env.XDG_DATA_HOME && env.XDG_DATA_HOME !== '' ? env.XDG_DATA_HOME : join(homedir(), '.local', 'share');
  return join(base, 'actorloop');
}

/**
 * Builds the EffectiveConfig. This is the one place that reads `process.env`; everything else
 * receives the frozen result. API keys are recorded by variable name only.
 */
export function loadConfig(flags: ConfigFlags, env: NodeJS.ProcessEnv = process.env): EffectiveConfig {
  const level = (env.ACTORLOOP_LOG ?? 'warn').toLowerCase();
  const parsed = EffectiveConfigSchema.safeParse({
    dataDir: resolve(flags.dataDir ?? (env.ACTORLOOP_DATA_DIR || defaultDataDir(env))),
    natsUrl: flags.nats ?? (env.NATS_URL || null),
    logLevel: level,
    faults: [flags.fault, env.ACTORLOOP_FAULTS].filter((x) => x && x !== '').join(',') || null,
    defaultModel: env.ACTORLOOP_MODEL || null,
    apiKeyEnv: env.OPENAI_API_KEY ? 'OPENAI_API_KEY' : null,
    openaiBaseUrl: env.OPENAI_BASE_URL || null,
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
  Object.defineProperty(config, SECRETS, { value: Object.freeze({ OPENAI_API_KEY: env.OPENAI_API_KEY ?? '' }), enumerable: false });
  return Object.freeze(config);
}

const SECRETS = Symbol('actorloop.secrets');

/** The value of a secret the config references by name (an API key); '' when unset. */
export function secretOf(config: EffectiveConfig, name: 'OPENAI_API_KEY'): string {
  const secrets = (config as unknown as Record<symbol, Record<string, string> | undefined>)[SECRETS];
  return secrets?.[name] ?? '';
}

/** True when ACTORLOOP_LOG asks for debug output (stack traces on errors). */
export function debugEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  const level = (env.ACTORLOOP_LOG ?? '').toLowerCase();
  return level === 'debug' || level === 'trace';
}
