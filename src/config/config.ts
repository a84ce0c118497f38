import { DEFAULT_SUBAGENT_LIMITS } from '../protocol/subagents.js';
import { DEFAULT_JOB_LIMITS } from '../protocol/job-events.js';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../protocol/errors.js';
import { ApprovalModeSchema } from '../protocol/events.js';
import { CompleteWhenSchema, DEFAULT_MAX_COMPLETION_REJECTIONS, OnCompletionExhaustedSchema } from '../protocol/completion.js';
import { PolicyRuleSchema } from '../protocol/policy-rule.js';
import { ContextSettingsSchema } from '../protocol/turn-settings.js';
import { ConfigFileSchema, readConfigFile, type ConfigFile } from './config-file.js';
import { applyOverrides, checkMerged, parseOverrides } from './overrides.js';
import {
  DEFAULT_APPROVAL_MODE, DEFAULT_APPROVAL_TTL_SECONDS, DEFAULT_ASK_TTL_SECONDS, isTrustedWorkspace, mergeLayers, trustedWorkspaces, workspaceKey, workspaceLayer,
} from './workspace-trust.js';

/** Where a setting came from: a built-in default, the workspace's or the user's file, the environment, or a flag (`--data-dir`, `-c`). */
export const ConfigSourceSchema = z.enum(['default', 'workspace', 'user', 'env', 'flag']);
/** Where a setting came from. */
export type ConfigSource = z.infer<typeof ConfigSourceSchema>;

/**
 * The frozen settings a command runs with (design §12): the workspace's `actorloop.toml`, then the
 * user's `~/.config/actorloop/config.toml`, then the environment, then flags; each later one wins.
 * The user's file wins over the workspace's on purpose: a cloned repository must not be able to
 * point the user's API key at another server. `-c key=value` flags win over all of them: they
 * are the user's own word for this one command.
 */
export const EffectiveConfigSchema = z.object({
  dataDir: z.string(),
  /** NATS_URL / `nats_url` / `--nats`: one server, or a cluster's servers comma-separated; null: the embedded server. */
  natsUrl: z.string().nullable(),
  /** Copies of every stream and bucket (`replicas`, ACTORLOOP_REPLICAS): 1–5. */
  replicas: z.number().int().min(1).max(5),
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
  /** The run mode of runs that pass no `--approve`. */
  approvalMode: ApprovalModeSchema,
  /** The system prompt of runs that pass no `--instructions FILE`; null: the built-in one. */
  instructions: z.string().nullable(),
  /** The completion policy of runs that pass no `--complete-when` (`complete_when`). */
  completeWhen: CompleteWhenSchema,
  /** Command prefixes that verify a change under `code-change` (`verify_commands`). */
  verifyCommands: z.array(z.string()),
  /** Answers a completion policy may refuse in a turn before it fails (`max_completion_rejections`). */
  maxCompletionRejections: z.number().int().positive(),
  /** What the refusal at that limit does: `fail` the turn, or `block` the agent's active goal (`on_completion_exhausted`). */
  onCompletionExhausted: OnCompletionExhaustedSchema,
  /** Where each config-file key's value came from, by its name in the file (`data_dir`, `approval_mode`, ...). */
  sources: z.record(z.string(), ConfigSourceSchema),
  /** Policy rules: the user's, then the workspace's (its allow rules only when the user trusts them). */
  policyRules: z.array(PolicyRuleSchema),
  /** Workspace rules that were not applied, and why (for `doctor`). */
  policyNotes: z.array(z.string()),
  observationBudgetBytes: z.number().int().positive(),
  maxModelOutputBytes: z.number().int().positive(),
  approvalTtlMs: z.number().int().positive(),
  /** How long an `ask_user` question waits for its answer (`ask_ttl_seconds`). */
  askTtlMs: z.number().int().positive(),
  maxParallelCalls: z.number().int().positive(),
  interruptFollowUps: z.enum(['keep', 'cancel']),
  /** Turns in a row without progress before a goal is `blocked` (`max_idle_turns`). */
  maxIdleTurns: z.number().int().positive(),
  /** What requests are assembled within (`context_window`, `docs_max_bytes`, `memory_max_bytes`, `retrieval_tokens`, the compaction keys); absent keys: the defaults. */
  context: ContextSettingsSchema,
  /** Names (never values) of environment variables whose values are redacted from tool output. */
  redactEnv: z.array(z.string()),
  /** Limits of subagent trees (`max_subagent_depth`, `max_children_per_parent`, `max_children_per_tree`, `on_parent_end`). */
  subagents: z.object({
    maxDepth: z.number().int().positive(),
    maxChildrenPerParent: z.number().int().positive(),
    maxChildrenPerTree: z.number().int().positive(),
    onParentEnd: z.enum(['cancel', 'detach']),
  }),
  /** Limits of background jobs (`max_running_jobs`, `max_running_jobs_per_tree`, `max_queued_jobs`, `job_timeout_seconds`, `job_kill_grace_ms`). */
  jobs: z.object({
    maxRunningPerHost: z.number().int().positive(),
    maxRunningPerTree: z.number().int().positive(),
    maxQueued: z.number().int().nonnegative(),
    timeoutSeconds: z.number().positive(),
    killGraceMs: z.number().int().nonnegative(),
  }),
  /** The workspace whose actorloop.toml was read, and whether the user trusts it. */
  workspace: z.object({ dir: z.string(), trusted: z.boolean() }),
  /** Keys of the workspace file that did not count, each with why (named on stderr and in `config show`). */
  ignoredKeys: z.array(z.string()),
  /** Workspaces the user's file trusts. */
  trustedWorkspaces: z.array(z.string()),
  /** How to log in to `natsUrl` (names and paths only; a password or token stays out of sight). */
  natsLogin: z.enum(['none', 'creds', 'user', 'token']),
  /** The `.creds` file of `natsLogin = creds`. */
  natsCreds: z.string().nullable(),
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
  /** A `.creds` file to log in to the NATS server with. */
  natsCreds?: string;
  /** `-c key=value` overrides of config-file keys, in the order given (a later one wins). */
  overrides?: string[];
}

/** The user's actorloop config dir: `$XDG_CONFIG_HOME/actorloop`, else `~/.config/actorloop` (config.toml, AGENTS.md, skills/). */
export function userConfigDir(env: NodeJS.ProcessEnv): string {
  const base = env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME !== '' ? env.XDG_CONFIG_HOME : join(env.HOME || homedir(), '.config');
  return join(base, 'actorloop');
}

/** Where the config files of a workspace and a user are. */
export function configFilePaths(cwd: string, env: NodeJS.ProcessEnv): { workspace: string; user: string } {
  return { workspace: join(resolve(cwd), 'actorloop.toml'), user: join(userConfigDir(env), 'config.toml') };
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
  const cwd = flags.cwd ?? process.cwd();
  const paths = configFilePaths(cwd, env);
  const wsRead = readConfigFile(paths.workspace);
  const user = readConfigFile(paths.user);
  const files = [wsRead ? paths.workspace : null, user ? paths.user : null].filter((f): f is string => f !== null);
  const trusted = isTrustedWorkspace(user, cwd);
  const ws = workspaceLayer(wsRead, user, trusted);
  const over = parseOverrides(flags.overrides ?? []);
  const fromFiles = mergeLayers(ws.file, user);
  const file = checkMerged(applyOverrides(fromFiles, over));
  const keyEnv = file.api_key_env ?? 'OPENAI_API_KEY';
  const natsCreds = flags.natsCreds ?? (over.nats_creds || env.NATS_CREDS || file.nats_creds || null);
  const natsLogin = natsCreds ? 'creds' : env.NATS_TOKEN ? 'token' : env.NATS_USER ? 'user' : 'none';
  // a flag named for a setting (--data-dir) wins over `-c` of the same key, which wins over the environment
  const given: Partial<Record<keyof ConfigFile, { flag: string | undefined; env: string | undefined }>> = {
    data_dir: { flag: flags.dataDir, env: env.ACTORLOOP_DATA_DIR },
    nats_url: { flag: flags.nats, env: env.NATS_URL },
    replicas: { flag: undefined, env: env.ACTORLOOP_REPLICAS },
    nats_creds: { flag: flags.natsCreds, env: env.NATS_CREDS },
    model: { flag: undefined, env: env.ACTORLOOP_MODEL },
    base_url: { flag: undefined, env: env.OPENAI_BASE_URL },
  };
  const sources = sourcesOf(given, over, ws.file, user, fromFiles);
  const parsed = EffectiveConfigSchema.safeParse({
    dataDir: resolve(flags.dataDir ?? (over.data_dir || env.ACTORLOOP_DATA_DIR || file.data_dir || defaultDataDir(env))),
    natsUrl: flags.nats ?? (over.nats_url || env.NATS_URL || file.nats_url || null),
    replicas: over.replicas ?? (env.ACTORLOOP_REPLICAS ? Number(env.ACTORLOOP_REPLICAS) : undefined) ?? file.replicas ?? 1,
    logLevel: level,
    faults: [flags.fault, env.ACTORLOOP_FAULTS].filter((x) => x && x !== '').join(',') || null,
    defaultModel: over.model || env.ACTORLOOP_MODEL || file.model || null,
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
    openaiBaseUrl: over.base_url || env.OPENAI_BASE_URL || file.base_url || null,
    snapshotEvery: Number(env.ACTORLOOP_SNAPSHOT_EVERY ?? 64),
    natsServerBinary: env.ACTORLOOP_NATS_SERVER || null,
    approvalMode: file.approval_mode ?? DEFAULT_APPROVAL_MODE,
    instructions: file.instructions ?? null,
    completeWhen: file.complete_when ?? 'answer',
    verifyCommands: file.verify_commands ?? [],
    maxCompletionRejections: file.max_completion_rejections ?? DEFAULT_MAX_COMPLETION_REJECTIONS,
    onCompletionExhausted: file.on_completion_exhausted ?? 'fail',
    sources,
    policyRules: file.policy?.rules ?? [],
    policyNotes: ws.ignored.filter((n) => n.startsWith('policy rule')),
    observationBudgetBytes: file.observation_budget_bytes ?? 16 * 1024,
    maxModelOutputBytes: file.max_model_output_bytes ?? 8 * 1024 * 1024,
    approvalTtlMs: Math.round((file.approval_ttl_seconds ?? DEFAULT_APPROVAL_TTL_SECONDS) * 1000),
    askTtlMs: Math.round((file.ask_ttl_seconds ?? DEFAULT_ASK_TTL_SECONDS) * 1000),
    maxParallelCalls: file.max_parallel_calls ?? 8,
    interruptFollowUps: file.interrupt_follow_ups ?? 'keep',
    maxIdleTurns: file.max_idle_turns ?? 2,
    context: {
      ...(file.context_window !== undefined ? { window: file.context_window } : {}),
      ...(file.docs_max_bytes !== undefined ? { docsMaxBytes: file.docs_max_bytes } : {}),
      ...(file.memory_max_bytes !== undefined ? { memoryMaxBytes: file.memory_max_bytes } : {}),
      ...(file.retrieval_tokens !== undefined ? { retrievalTokens: file.retrieval_tokens } : {}),
      ...(file.compaction_min_gain_tokens !== undefined ? { compactionMinGainTokens: file.compaction_min_gain_tokens } : {}),
      ...(file.compaction_keep_steps !== undefined ? { compactionKeepSteps: file.compaction_keep_steps } : {}),
    },
    subagents: {
      maxDepth: file.max_subagent_depth ?? DEFAULT_SUBAGENT_LIMITS.maxDepth,
      maxChildrenPerParent: file.max_children_per_parent ?? DEFAULT_SUBAGENT_LIMITS.maxChildrenPerParent,
      maxChildrenPerTree: file.max_children_per_tree ?? DEFAULT_SUBAGENT_LIMITS.maxChildrenPerTree,
      onParentEnd: file.on_parent_end ?? DEFAULT_SUBAGENT_LIMITS.onParentEnd,
    },
    jobs: {
      maxRunningPerHost: file.max_running_jobs ?? DEFAULT_JOB_LIMITS.maxRunningPerHost,
      maxRunningPerTree: file.max_running_jobs_per_tree ?? DEFAULT_JOB_LIMITS.maxRunningPerTree,
      maxQueued: file.max_queued_jobs ?? DEFAULT_JOB_LIMITS.maxQueued,
      timeoutSeconds: file.job_timeout_seconds ?? DEFAULT_JOB_LIMITS.timeoutSeconds,
      killGraceMs: file.job_kill_grace_ms ?? DEFAULT_JOB_LIMITS.killGraceMs,
    },
    redactEnv: [...new Set([keyEnv, 'NATS_PASSWORD', 'NATS_TOKEN', ...(file.redact_env ?? [])])],
    workspace: { dir: workspaceKey(cwd), trusted },
    ignoredKeys: ws.ignored.map((n) => `${paths.workspace}: ${n}`),
    trustedWorkspaces: trustedWorkspaces(user),
    natsLogin,
    natsCreds,
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.join('.');
    const hint =
      field === 'logLevel'
        ? 'set ACTORLOOP_LOG to one of fatal, error, warn, info, debug, trace, silent'
        : field === 'replicas'
          ? 'set ACTORLOOP_REPLICAS (or replicas in actorloop.toml) to a whole number from 1 to 5: 1 on one server, 3 on a cluster'
          : 'check the flag or environment variable that sets it';
    throw new ConfigError('config.invalid', `invalid setting ${field}: ${issue.message}`, { hint });
  }
  const config = { ...parsed.data };
  // The key itself rides along out of sight: not enumerable, so no log, event or JSON of the
  // config ever carries it; the model factory reads it by the variable's name.
  Object.defineProperty(config, SECRETS, {
    value: Object.freeze({ OPENAI_API_KEY: env[keyEnv] ?? '', NATS_USER: env.NATS_USER ?? '', NATS_PASSWORD: env.NATS_PASSWORD ?? '', NATS_TOKEN: env.NATS_TOKEN ?? '' }),
    enumerable: false,
  });
  // Tools' processes get the environment (with secrets stripped by the sandbox); the values of
  // `redactEnv` are redacted from tool output. Both out of sight, like the key.
  const environment = Object.freeze(Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => typeof e[1] === 'string')));
  Object.defineProperty(config, ENVIRONMENT, { value: environment, enumerable: false });
  return Object.freeze(config);
}

/**
 * Where each config-file key's value came from. Of the two files, the one whose value is the
 * merged one; lists that add up (policy rules, redactions) name the user's file when it added to them.
 */
function sourcesOf(
  given: Partial<Record<keyof ConfigFile, { flag: string | undefined; env: string | undefined }>>,
  over: ConfigFile,
  ws: ConfigFile,
  user: ConfigFile | null,
  merged: ConfigFile,
): Record<string, ConfigSource> {
  const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);
  const sources: Record<string, ConfigSource> = {};
  for (const key of Object.keys(ConfigFileSchema.shape) as Array<keyof ConfigFile>) {
    const g = given[key];
    const w = ws[key];
    const u = user?.[key];
    sources[key] =
      g?.flag !== undefined || over[key] !== undefined ? 'flag'
        : g?.env ? 'env'
          : w === undefined && u === undefined ? 'default'
            : w === undefined ? 'user'
              : u === undefined ? 'workspace'
                : same(merged[key], w) && !same(merged[key], u) ? 'workspace' : 'user';
  }
  // mergeLayers always makes a policy table; with no rule in it, the rules are the default (none)
  if ((merged.policy?.rules ?? []).length === 0 && over.policy === undefined) sources.policy = 'default';
  return sources;
}

const ENVIRONMENT = Symbol('actorloop.environment');

/** The environment the config was loaded from, for the processes tools start; {} for a config built otherwise. */
export function environmentOf(config: EffectiveConfig): Readonly<Record<string, string>> {
  return (config as unknown as Record<symbol, Readonly<Record<string, string>> | undefined>)[ENVIRONMENT] ?? {};
}

/** Values to redact from tool output: those of the variables `redactEnv` names that are set. */
export function redactedValues(config: EffectiveConfig): string[] {
  const env = environmentOf(config);
  return config.redactEnv.map((name) => env[name] ?? '').filter((v) => v !== '');
}

const SECRETS = Symbol('actorloop.secrets');

/** The API key, read from the variable the config names (OPENAI_API_KEY unless `api_key_env` says otherwise); '' when unset. */
export function secretOf(config: EffectiveConfig, name: 'OPENAI_API_KEY' | 'NATS_USER' | 'NATS_PASSWORD' | 'NATS_TOKEN'): string {
  const secrets = (config as unknown as Record<symbol, Record<string, string> | undefined>)[SECRETS];
  return secrets?.[name] ?? '';
}

/** True when ACTORLOOP_LOG asks for debug output (stack traces on errors). */
export function debugEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  const level = (env.ACTORLOOP_LOG ?? '').toLowerCase();
  return level === 'debug' || level === 'trace';
}
