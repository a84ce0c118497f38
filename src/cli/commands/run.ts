import { readFile, stat } from 'node:fs/promises';
import { outputValidator } from '../../model/output-schema.js';
import { resolve } from 'node:path';
import type { EffectiveConfig } from '../../config/config.js';
import { loadScript } from '../../model/script.js';
import { parseModelSpec } from '../../model/model-spec.js';
import { ConfigError } from '../../protocol/errors.js';
import { ReasoningEffortSchema, type ApprovalMode, type TurnRequest } from '../../protocol/events.js';
import { newId } from '../../protocol/ids.js';
import { createLogger, openRuntime } from '../runtime.js';
import { RunPrinter, type Out } from '../output.js';
import { followTurn } from './follow-turn.js';
import { submitToHosts } from '../hand-off.js';
import { emptyProjection } from '../../store/projection.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import { failureOf, printsOnCommit, promptFor } from './resume.js';
import { builtinTools } from '../../tools/builtins/index.js';
import { afterPlanTurn } from './plan.js';

/** Options of `actorloop run`, as commander parsed them. */
export interface RunOptions {
  model?: string;
  cwd?: string;
  json?: boolean;
  maxSteps?: number;
  maxToolCalls?: number;
  deadline?: number;
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
}

/** The model a run uses when none is named but an OpenAI key is configured. */
export const DEFAULT_OPENAI_MODEL = 'openai:gpt-4.1-mini';

/** Checks a run's inputs before anything is started: each mistake is one line and exit 2. */
export async function validateRun(task: string, opts: RunOptions, config: EffectiveConfig): Promise<TurnRequest> {
  if (task.trim() === '') {
    throw new ConfigError('config.task', 'the task is empty', { hint: 'say what the agent should do, e.g. actorloop run "fix the failing test"' });
  }
  const baseUrl = opts.baseUrl ?? config.openaiBaseUrl;
  const spec = opts.model ?? config.defaultModel ?? (config.apiKeyEnv || baseUrl ? DEFAULT_OPENAI_MODEL : null);
  if (!spec) {
    throw new ConfigError('config.no_model', 'no model to run with', {
      hint: 'pass --model scripted:<file.json> (a scripted model), or set OPENAI_API_KEY (or ACTORLOOP_MODEL) to use an OpenAI model',
    });
  }
  let model = spec;
  const parsed = parseModelSpec(spec);
  if (parsed.provider === 'scripted') {
    const file = resolve(parsed.file);
    await loadScript(file);
    // The log records an absolute path: `resume` may run from another directory.
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
  const workspace = resolve(opts.cwd ?? '.');
  const st = await stat(workspace).catch(() => null);
  if (!st?.isDirectory()) {
    throw new ConfigError('config.cwd', `workspace ${workspace} is not a directory`, { hint: 'pass --cwd <an existing directory>' });
  }
  let tools: string[] | null = null;
  if (opts.tools !== undefined) {
    const known = builtinTools().map((t) => t.name).sort();
    tools = opts.tools.split(',').map((t) => t.trim()).filter(Boolean);
    const unknown = tools.filter((t) => !known.includes(t));
    if (unknown.length > 0) {
      throw new ConfigError('config.tools', `unknown tool${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}`, {
        hint: `--tools takes a comma-separated list of: ${known.join(', ')}`,
      });
    }
  }
  const outputSchema = opts.outputSchema === undefined ? null : await readOutputSchema(opts.outputSchema);
  const effort = opts.effort === undefined ? null : ReasoningEffortSchema.safeParse(opts.effort);
  if (effort && !effort.success) {
    throw new ConfigError('config.effort', `unknown effort "${opts.effort}"`, { hint: `--effort takes ${ReasoningEffortSchema.options.join(', ')}` });
  }
  return {
    ...(outputSchema ? { outputSchema } : {}),
    ...(effort?.success ? { effort: effort.data } : {}),
    ...(opts.maxOutputTokens ? { maxOutputTokens: opts.maxOutputTokens } : {}),
    ...(opts.planMode ? { planMode: true } : {}),
    approvalMode: opts.approve ?? config.approvalMode,
    // the run records the config it was started with; JSON drops the key (not enumerable)
    config: JSON.parse(JSON.stringify(config)) as Record<string, unknown>,
    model,
    baseUrl,
    workspace,
    tools,
    instructions: null,
    maxSteps: opts.maxSteps ?? null,
    maxToolCalls: opts.maxToolCalls ?? null,
    deadlineSeconds: opts.deadline ?? null,
    maxAttempts: null,
  };
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
 * `actorloop run`: starts an agent and sends it the task through its inbox. With a live host
 * (`actorloop host`) it hands the agent over, creating its directory entry and inbox without
 * taking its lease, and follows its events; otherwise, or with `--in-process` or a fault spec
 * (meant for the process that hosts the agent), it hosts the agent here. Either way it prints the
 * same output and exits with the same code at the turn's end.
 */
export async function runCommand(
  task: string,
  opts: RunOptions,
  config: EffectiveConfig,
  out: Out,
  onAgent?: (agentId: string) => void,
): Promise<number> {
  const request = await validateRun(task, opts, config);
  const logger = createLogger(config);
  const rt = await openRuntime(config, logger);
  try {
    const json = opts.json === true;
    const printer = new RunPrinter(out, json);
    const actorId = newId('agent');
    const entry = {
      actorId,
      kind: 'agent' as const,
      parentId: null,
      rootId: actorId,
      title: task.trim().slice(0, 120),
      workspace: request.workspace,
      labels: {},
    };
    const message: InboxMessage = {
      id: newId('message'),
      from: 'cli',
      to: actorId,
      kind: 'user_message',
      target: 'next_turn',
      wakeup: true,
      content: task,
      request,
      sentAt: new Date().toISOString(),
    };
    const handOff = opts.inProcess !== true && config.faults === null && (await rt.hosts.live(Date.now())).length > 0;
    // --quiet: stdout is the answer's alone
    (json || out.quiet ? out.stderr : out.stdout).write(`${actorId}\n`);
    onAgent?.(actorId);
    if (handOff) {
      const deadlineAt = request.deadlineSeconds === null ? null : Date.now() + request.deadlineSeconds * 1000;
      await submitToHosts(rt, entry, message);
      const code = await followTurn({
        rt, entry, from: emptyProjection(actorId), directory: rt.bus.directory, printer, out, json,
        prompt: promptFor(out, json), hosting: { kind: 'host', handedOver: true }, deadlineAt,
      });
      return request.planMode ? await afterPlanTurn(rt, entry, code, out, json) : code;
    }
    // hosted here, followed as a host's agent is: the same follower prints it and asks for approvals
    const echo = printsOnCommit(config);
    const supervisor = rt.supervisor(echo ? { onCommit: (_id, events) => printer.commit(events) } : {});
    const actor = await supervisor.create(entry, { epoch: (await rt.pinNew(actorId)).epoch });
    const failed = failureOf(actor.whenTurnEnds());
    await supervisor.send(message);
    const code = await followTurn({
      rt, entry, from: emptyProjection(actorId), directory: rt.bus.directory, printer, out, json,
      prompt: promptFor(out, json), hosting: { kind: 'here', failed }, echo: !echo,
    });
    return request.planMode ? await afterPlanTurn(rt, entry, code, out, json) : code;
  } finally {
    await rt.close();
  }
}
