import { readFile, stat } from 'node:fs/promises';
import { outputValidator } from '../../model/output-schema.js';
import { resolve } from 'node:path';
import type { EffectiveConfig } from '../../config/config.js';
import { loadScript } from '../../model/script.js';
import { parseModelSpec } from '../../model/model-spec.js';
import { ConfigError } from '../../protocol/errors.js';
import { ReasoningEffortSchema, type ApprovalMode, type GoalRequest, type TurnRequest, type TurnSettings } from '../../protocol/events.js';
import { CompleteWhenSchema, DEFAULT_MAX_COMPLETION_REJECTIONS, RETRIEVING_TOOLS } from '../../protocol/completion.js';
import { builtinTools } from '../../tools/builtins/index.js';
import { requestFromSettings } from '../../actors/agent/plan-mode.js';
import { priceFor } from '../../model/pricing.js';
import { modelName } from '../../model/model-spec.js';

/** Options of `actorloop run`, as commander parsed them. */
export interface RunOptions {
  model?: string;
  cwd?: string;
  json?: boolean;
  maxSteps?: number;
  maxToolCalls?: number;
  deadline?: number;
  /** `--max-tokens N`: tokens the turn's attempts may use (checked here: a whole number above 0). */
  maxTokens?: string | number;
  /** `--max-cost USD`: what the turn's attempts may cost (checked here: a number above 0). */
  maxCost?: string | number;
  tools?: string;
  baseUrl?: string;
  outputSchema?: string;
  effort?: string;
  maxOutputTokens?: number;
  approve?: ApprovalMode;
  /** Host the agent in this process even when a host is running. */
  inProcess?: boolean;
  /** Run the turn read-only: the agent explores and writes a plan for a person to accept. */
  planMode?: boolean;
  /** `--continue <agentId>`: the task is the next turn of this agent (a conversation). */
  continue?: string;
  /** `--last`: the task is the next turn of the latest agent of this workspace. */
  last?: boolean;
  /** A file holding the system prompt; wins over the config's `instructions`. */
  instructions?: string;
  /** `--complete-when`: the completion policy; wins over the config's `complete_when`. */
  completeWhen?: string;
  /** `--goal <objective>`: a goal that outlives the turn, created with it. */
  goal?: string;
  /** The goal's budgets (`--goal-tokens`, `--goal-cost` USD, `--goal-seconds`), as commander parsed them (checked here). */
  goalTokens?: string;
  goalCost?: string;
  goalSeconds?: string;
}

/** The model a run uses when none is named but an OpenAI key is configured. */
export const DEFAULT_OPENAI_MODEL = 'openai:gpt-4.1-mini';

/** Checks a run's inputs before anything is started: each mistake is one line and exit 2. */
export async function validateRun(task: string, opts: RunOptions, config: EffectiveConfig): Promise<TurnRequest> {
  checkTask(task);
  const baseUrl = opts.baseUrl ?? config.openaiBaseUrl;
  const spec = opts.model ?? config.defaultModel ?? (config.apiKeyEnv || baseUrl ? DEFAULT_OPENAI_MODEL : null);
  if (!spec) {
    throw new ConfigError('config.no_model', 'no model to run with', {
      hint: 'pass --model scripted:<file.json> (a scripted model), or set OPENAI_API_KEY (or ACTORLOOP_MODEL) to use an OpenAI model',
    });
  }
  const model = await checkModel(spec, baseUrl, config);
  const flags = await settingsOfFlags(opts);
  checkPriced(model, flags.maxCostUsd, config);
  const goal = goalOfFlags(opts, config);
  checkPriced(model, goal?.budget.costUsd, config, '--goal-cost');
  const request: TurnRequest = {
    ...(goal ? { goal } : {}),
    ...(flags.outputSchema ? { outputSchema: flags.outputSchema } : {}),
    ...(flags.effort ? { effort: flags.effort } : {}),
    ...(flags.maxOutputTokens ? { maxOutputTokens: flags.maxOutputTokens } : {}),
    ...(flags.planMode ? { planMode: true } : {}),
    approvalMode: flags.approvalMode ?? config.approvalMode,
    // the tree's limits travel with the turn: a host that runs it applies the stricter of these and its own
    treeLimits: { maxDepth: config.subagents.maxDepth, maxChildrenPerParent: config.subagents.maxChildrenPerParent, maxChildrenPerTree: config.subagents.maxChildrenPerTree },
    // the run records the config it was started with; JSON drops the key (not enumerable)
    config: configSnapshot(config),
    model,
    baseUrl,
    workspace: flags.workspace ?? (await checkWorkspace('.')),
    tools: flags.tools ?? null,
    // null: the built-in instructions (plan mode appends its paragraph to whichever it is)
    instructions: flags.instructions ?? config.instructions,
    maxSteps: flags.maxSteps ?? null,
    maxToolCalls: flags.maxToolCalls ?? null,
    deadlineSeconds: flags.deadlineSeconds ?? null,
    ...(flags.maxTokens ? { maxTokens: flags.maxTokens } : {}),
    ...(flags.maxCostUsd ? { maxCostUsd: flags.maxCostUsd } : {}),
    maxAttempts: null,
    ...completionRequest(flags, config),
    ...(Object.keys(config.context).length > 0 ? { context: { ...config.context } } : {}),
  };
  checkCompletion(request);
  return request;
}

/** The completion settings of a run: its flag's policy over the config's, the config's verify commands, limit and what the limit does. */
export function completionRequest(flags: Partial<TurnRequest>, config: EffectiveConfig): Pick<TurnRequest, 'completeWhen' | 'verifyCommands' | 'maxCompletionRejections' | 'onCompletionExhausted'> {
  const policy = flags.completeWhen ?? config.completeWhen;
  return {
    ...(policy !== 'answer' ? { completeWhen: policy } : {}),
    ...(config.verifyCommands.length > 0 ? { verifyCommands: [...config.verifyCommands] } : {}),
    ...(config.maxCompletionRejections !== DEFAULT_MAX_COMPLETION_REJECTIONS ? { maxCompletionRejections: config.maxCompletionRejections } : {}),
    ...(config.onCompletionExhausted !== 'fail' ? { onCompletionExhausted: config.onCompletionExhausted } : {}),
  };
}

/**
 * Refuses a completion policy the run could never satisfy, before anything starts: `code-change`
 * with no command that verifies, `cited` with no tool that retrieves evidence.
 */
export function checkCompletion(request: Pick<TurnRequest, 'completeWhen' | 'verifyCommands' | 'tools'>): void {
  if (request.completeWhen === 'code-change' && (request.verifyCommands ?? []).length === 0) {
    throw new ConfigError('config.verify_commands', '--complete-when code-change needs verify_commands, and none is configured', {
      hint: 'set verify_commands = ["npm test"] in actorloop.toml (or -c \'verify_commands=["npm test"]\'): the commands whose passing run verifies a change',
    });
  }
  if (request.completeWhen === 'cited' && request.tools !== null && !request.tools.some((t) => RETRIEVING_TOOLS.includes(t))) {
    throw new ConfigError('config.complete_when', `--complete-when cited needs a tool that retrieves evidence, and --tools ${request.tools.join(',') || '(none)'} has none`, {
      hint: `add ${RETRIEVING_TOOLS.join(', ')} (any of them) to --tools, or leave --tools out`,
    });
  }
}

/**
 * Refuses a cost budget for a model with no known price: its spend could not be counted, and a
 * budget that passes silently is no budget.
 */
export function checkPriced(model: string, maxCostUsd: number | null | undefined, config: EffectiveConfig, flag: '--max-cost' | '--goal-cost' = '--max-cost'): void {
  if (maxCostUsd == null) return;
  const name = modelName(model);
  if (priceFor(name, config.pricing) !== null) return;
  const code = flag === '--max-cost' ? 'config.max_cost_unpriced' : 'config.goal_cost_unpriced';
  throw new ConfigError(code, `${flag} needs the model's price, and ${name} has no known price`, {
    hint: `set it in the config ([pricing."${name}"] input_per_mtok = … and output_per_mtok = …, or -c 'pricing."${name}".input_per_mtok=…'), or use ${flag === '--max-cost' ? '--max-tokens' : '--goal-tokens'}`,
  });
}

/** A goal budget flag's value: a number above 0 (a whole one for tokens); anything else is a usage error. */
function goalBudgetFlag(name: string, value: string | undefined, whole: boolean): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0 || (whole && !Number.isInteger(n))) {
    throw new ConfigError('config.goal_budget', `${name} takes ${whole ? 'a whole number' : 'a number'} above 0, got "${value}"`, {
      hint: `e.g. --goal-tokens 200000, --goal-cost 0.50, --goal-seconds 600 (leave a budget out for no limit)`,
    });
  }
  return n;
}

/** The goal `run --goal` asks for, its budgets checked; a budget flag without `--goal` is a usage error. */
export function goalOfFlags(opts: RunOptions, config: Pick<EffectiveConfig, 'maxIdleTurns'>): GoalRequest | null {
  const tokens = goalBudgetFlag('--goal-tokens', opts.goalTokens, true);
  const costUsd = goalBudgetFlag('--goal-cost', opts.goalCost, false);
  const seconds = goalBudgetFlag('--goal-seconds', opts.goalSeconds, false);
  if (opts.goal === undefined) {
    if (tokens !== undefined || costUsd !== undefined || seconds !== undefined) {
      throw new ConfigError('config.goal_budget', 'a goal budget needs a goal', { hint: 'pass --goal "<objective>" with --goal-tokens, --goal-cost or --goal-seconds' });
    }
    return null;
  }
  if (opts.planMode) {
    throw new ConfigError('config.goal_plan_mode', '--goal and --plan-mode do not go together: a goal goes on by itself, a plan waits for you', {
      hint: 'plan first (run --plan-mode, then plan --accept), or run --goal without --plan-mode',
    });
  }
  if (opts.goal.trim() === '') {
    throw new ConfigError('config.goal', 'the goal is empty', { hint: 'say what the goal is, e.g. --goal "all tests in test/ pass"' });
  }
  return {
    objective: opts.goal.trim(),
    budget: { ...(tokens !== undefined ? { tokens } : {}), ...(costUsd !== undefined ? { costUsd } : {}), ...(seconds !== undefined ? { seconds } : {}) },
    maxIdleTurns: config.maxIdleTurns,
  };
}

/** The config a turn records (design §12: each run records the snapshot it ran with); secrets are not enumerable, so not in it. */
export function configSnapshot(config: EffectiveConfig): Record<string, unknown> {
  return JSON.parse(JSON.stringify(config)) as Record<string, unknown>;
}

/** Refuses an empty task. */
export function checkTask(task: string): void {
  if (task.trim() === '') {
    throw new ConfigError('config.task', 'the task is empty', { hint: 'say what the agent should do, e.g. actorloop run "fix the failing test"' });
  }
}

/**
 * Checks a model spec (a script that loads; an OpenAI model with a key or an endpoint) and the
 * base URL, and returns the spec the log records: a script's path made absolute, since `resume`
 * may run from another directory.
 */
export async function checkModel(spec: string, baseUrl: string | null, config: EffectiveConfig): Promise<string> {
  let model = spec;
  const parsed = parseModelSpec(spec);
  if (parsed.provider === 'scripted') {
    const file = resolve(parsed.file);
    await loadScript(file);
    model = `scripted:${file}`;
  } else if (!config.apiKeyEnv && !baseUrl) {
    throw new ConfigError('config.no_api_key', `no API key for ${spec}`, {
      hint: 'set OPENAI_API_KEY, or pass --base-url <an OpenAI-compatible server>/v1 (a local server may need no key)',
    });
  }
  if (baseUrl !== null && !/^https?:\/\/[^\s]+$/.test(baseUrl)) {
    throw new ConfigError('config.base_url', `base URL "${baseUrl}" is not an http(s) URL`, {
      hint: 'pass --base-url http://host:port/v1 (or set OPENAI_BASE_URL)',
    });
  }
  return model;
}

/** A workspace directory made absolute; a ConfigError when it is not a directory. */
async function checkWorkspace(dir: string): Promise<string> {
  const workspace = resolve(dir);
  const st = await stat(workspace).catch(() => null);
  if (!st?.isDirectory()) {
    throw new ConfigError('config.cwd', `workspace ${workspace} is not a directory`, { hint: 'pass --cwd <an existing directory>' });
  }
  return workspace;
}

/** The settings `run`'s own flags give, each checked; a key is absent where its flag was not given. */
export async function settingsOfFlags(opts: RunOptions): Promise<Partial<TurnRequest>> {
  const s: Partial<TurnRequest> = {};
  if (opts.cwd !== undefined) s.workspace = await checkWorkspace(opts.cwd);
  if (opts.tools !== undefined) {
    const known = builtinTools().map((t) => t.name).sort();
    const tools = opts.tools.split(',').map((t) => t.trim()).filter(Boolean);
    const unknown = tools.filter((t) => !known.includes(t));
    if (unknown.length > 0) {
      throw new ConfigError('config.tools', `unknown tool${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}`, {
        hint: `--tools takes a comma-separated list of: ${known.join(', ')}`,
      });
    }
    s.tools = tools;
  }
  if (opts.outputSchema !== undefined) s.outputSchema = await readOutputSchema(opts.outputSchema);
  if (opts.instructions !== undefined) s.instructions = await readInstructions(opts.instructions);
  if (opts.effort !== undefined) {
    const effort = ReasoningEffortSchema.safeParse(opts.effort);
    if (!effort.success) {
      throw new ConfigError('config.effort', `unknown effort "${opts.effort}"`, { hint: `--effort takes ${ReasoningEffortSchema.options.join(', ')}` });
    }
    s.effort = effort.data;
  }
  if (opts.maxOutputTokens) s.maxOutputTokens = opts.maxOutputTokens;
  if (opts.planMode) s.planMode = true;
  if (opts.completeWhen !== undefined) {
    const policy = CompleteWhenSchema.safeParse(opts.completeWhen);
    if (!policy.success) {
      throw new ConfigError('config.complete_when', `unknown completion policy "${opts.completeWhen}"`, {
        hint: `--complete-when takes ${CompleteWhenSchema.options.join(', ')}`,
      });
    }
    s.completeWhen = policy.data;
  }
  if (opts.approve !== undefined) s.approvalMode = opts.approve;
  if (opts.maxSteps !== undefined) s.maxSteps = opts.maxSteps;
  if (opts.maxToolCalls !== undefined) s.maxToolCalls = opts.maxToolCalls;
  if (opts.deadline !== undefined) s.deadlineSeconds = opts.deadline;
  if (opts.maxTokens !== undefined) s.maxTokens = budgetFlag('--max-tokens', opts.maxTokens, true);
  if (opts.maxCost !== undefined) s.maxCostUsd = budgetFlag('--max-cost', opts.maxCost, false);
  return s;
}

/** A budget flag's value: a number above 0 (a whole one for tokens); anything else is a usage error. */
function budgetFlag(flag: '--max-tokens' | '--max-cost', raw: string | number, whole: boolean): number {
  const text = String(raw).trim();
  const n = Number(text);
  if (text === '' || !Number.isFinite(n) || n <= 0 || (whole && !Number.isInteger(n))) {
    const what = whole ? 'a whole number of tokens above 0' : 'US dollars, a number above 0';
    throw new ConfigError('config.budget', `${flag} takes ${what}, got "${text}"`, {
      hint: whole ? `e.g. ${flag} 200000` : `e.g. ${flag} 0.50`,
    });
  }
  return n;
}

/** Reads `--instructions FILE`: the system prompt, as written; a missing or empty file is a usage error. */
async function readInstructions(path: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(resolve(path), 'utf8');
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'not found' : `not readable (${(err as Error).message})`;
    throw new ConfigError('config.instructions', `instructions file ${path} is ${why}`, { hint: 'pass --instructions <a text file holding the system prompt>' });
  }
  if (text.trim() === '') {
    throw new ConfigError('config.instructions', `instructions file ${path} is empty`, {
      hint: 'write the system prompt into it, or leave --instructions out for the configured (or built-in) instructions',
    });
  }
  return text;
}

/** Reads `--output-schema`: a JSON Schema file the final answer must match. */
async function readOutputSchema(path: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(resolve(path), 'utf8');
  } catch {
    throw new ConfigError('config.output_schema', `output schema file not found: ${path}`, { hint: 'pass --output-schema <a JSON Schema file>' });
  }
  let schema: unknown;
  try {
    schema = JSON.parse(text);
  } catch (err) {
    throw new ConfigError('config.output_schema', `output schema ${path} is not JSON: ${(err as Error).message}`);
  }
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) {
    throw new ConfigError('config.output_schema', `output schema ${path} is not a JSON Schema object`);
  }
  outputValidator(schema as Record<string, unknown>);
  return schema as Record<string, unknown>;
}

/**
 * The request of the next turn: the last turn's settings (plan mode kept, no deadline), with what
 * this command says over them — its flags, and the `-c` overrides of the settings a turn records
 * (run mode, instructions, model: the person's word for this command, as a flag is) — and the
 * config this command runs with recorded.
 */
export async function continueRequest(opts: RunOptions, config: EffectiveConfig, last: TurnSettings): Promise<TurnRequest> {
  const base = requestFromSettings(last);
  const flags = await settingsOfFlags(opts);
  const said = (key: string): boolean => config.sources[key] === 'flag';
  const spec = opts.model ?? (said('model') ? config.defaultModel ?? undefined : undefined);
  const baseUrl = opts.baseUrl ?? (said('base_url') ? config.openaiBaseUrl : base.baseUrl);
  // a model or an endpoint named now is checked as `run` checks it; the last turn's are as recorded
  const model = spec !== undefined || baseUrl !== base.baseUrl ? await checkModel(spec ?? base.model, baseUrl, config) : base.model;
  // a goal started now brings its tools to the tool list the last turn recorded (resolveSettings)
  const goal = goalOfFlags(opts, config);
  const request: TurnRequest = {
    ...base,
    ...(said('approval_mode') ? { approvalMode: config.approvalMode } : {}),
    ...(said('instructions') && config.instructions !== null ? { instructions: config.instructions } : {}),
    // the turn records what the completion limit does: `-c` says it again for this turn, either way
    ...(said('on_completion_exhausted') ? { onCompletionExhausted: config.onCompletionExhausted } : {}),
    ...flags,
    ...(goal ? { goal } : {}),
    model,
    baseUrl,
    config: configSnapshot(config),
  };
  checkPriced(request.model, request.maxCostUsd, config);
  checkPriced(request.model, goal?.budget.costUsd, config, '--goal-cost');
  // a policy named now takes the verify commands this command's config names
  if (flags.completeWhen !== undefined) Object.assign(request, completionRequest(flags, config));
  checkCompletion(request);
  return request;
}
