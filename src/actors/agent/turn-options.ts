import { outputValidator } from '../../model/output-schema.js';
import { priceFor } from '../../model/pricing.js';
import type { CompleteWhen } from '../../protocol/completion.js';
import { RETRIEVING_TOOLS } from '../../protocol/completion.js';
import { ConfigError } from '../../protocol/errors.js';
import { TurnRequestSchema, type ApprovalMode, type ReasoningEffort, type TurnRequest } from '../../protocol/turn-settings.js';
import { modelName } from '../../model/model-spec.js';

// What one embedded turn may ask for besides its task: the flags of `actorloop run`, as options.

/** A goal that outlives the turn (`run --goal` and its budgets): created with the turn. */
export interface GoalOptions {
  /** What the goal is done at, e.g. "all tests in test/ pass". */
  objective: string;
  /** Tokens (input + output) the goal may use over all its turns (`--goal-tokens`). */
  tokens?: number;
  /** US dollars the goal may cost over all its turns (`--goal-cost`). */
  costUsd?: number;
  /** Seconds of turns the goal may take (`--goal-seconds`). */
  seconds?: number;
  /** Turns in a row without progress before the goal is `blocked` (default 2, as `max_idle_turns`). */
  maxIdleTurns?: number;
}

/** Options of one turn (`agent.send(task, options)`), each as the `actorloop run` flag of its name. */
export interface TurnOptions {
  /** `--goal`: a goal the turn starts. Not with `planMode`. */
  goal?: GoalOptions;
  /** `--plan-mode`: the turn is read-only and writes a plan for a person to accept. */
  planMode?: boolean;
  /** `--complete-when`: when a final answer completes the turn (default `answer`). */
  completeWhen?: CompleteWhen;
  /** The commands whose passing run verifies a change (`verify_commands`); `code-change` needs one. */
  verifyCommands?: string[];
  /** `--max-tokens`: tokens the turn's attempts may use. */
  maxTokens?: number;
  /** `--max-cost`: US dollars the turn's attempts may cost (the model needs a known price). */
  maxCostUsd?: number;
  /** `--output-schema`: a JSON Schema the final answer must match. */
  outputSchema?: Record<string, unknown>;
  /** `--effort`: reasoning effort for models that take one. */
  effort?: ReasoningEffort;
  /** `--max-output-tokens`: the most tokens one model answer may have. */
  maxOutputTokens?: number;
  /** These win over the agent's own for this turn. */
  approvalMode?: ApprovalMode;
  instructions?: string;
  tools?: string[];
  maxSteps?: number;
  maxToolCalls?: number;
  deadlineSeconds?: number;
}

/** The default of `max_idle_turns`, which an embedded goal has no config to read from. */
const DEFAULT_MAX_IDLE_TURNS = 2;

/**
 * The turn request `base` becomes with `options`, checked as `actorloop run` checks its flags:
 * a ConfigError naming the option and what it takes, before anything is sent.
 */
export function turnRequestWith(base: TurnRequest, options: TurnOptions = {}): TurnRequest {
  const { goal, verifyCommands, ...rest } = options;
  if (goal && options.planMode) {
    throw new ConfigError('config.goal_plan_mode', 'goal and planMode do not go together: a goal goes on by itself, a plan waits for you', {
      hint: 'plan first (planMode: true, then accept the plan), or send with a goal and without planMode',
    });
  }
  if (goal && (typeof goal.objective !== 'string' || goal.objective.trim() === '')) {
    throw new ConfigError('config.goal', 'the goal is empty', { hint: 'say what the goal is, e.g. goal: { objective: "all tests in test/ pass" }' });
  }
  const request = {
    ...base,
    ...Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)),
    ...(verifyCommands ? { verifyCommands } : {}),
    ...(goal ? {
      goal: {
        objective: goal.objective.trim(),
        budget: { ...(goal.tokens !== undefined ? { tokens: goal.tokens } : {}), ...(goal.costUsd !== undefined ? { costUsd: goal.costUsd } : {}), ...(goal.seconds !== undefined ? { seconds: goal.seconds } : {}) },
        maxIdleTurns: goal.maxIdleTurns ?? DEFAULT_MAX_IDLE_TURNS,
      },
    } : {}),
  };
  const parsed = TurnRequestSchema.safeParse(request);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.join('.') || 'the turn options';
    throw new ConfigError('config.turn_option', `turn option ${where}: ${issue.message}`, {
      hint: 'see TurnOptions: budgets are numbers above 0 (tokens whole), completeWhen and effort one of their names',
    });
  }
  const checked = parsed.data;
  if (checked.outputSchema) outputValidator(checked.outputSchema);
  checkCompletion(checked);
  for (const [what, usd] of [['maxCostUsd', checked.maxCostUsd], ['goal.costUsd', checked.goal?.budget.costUsd]] as const) {
    if (usd != null && priceFor(modelName(checked.model), {}) === null) {
      throw new ConfigError('config.max_cost_unpriced', `${what} needs the model's price, and ${modelName(checked.model)} has no known price`, {
        hint: what === 'maxCostUsd' ? 'use maxTokens instead' : 'use goal.tokens instead',
      });
    }
  }
  return checked;
}

/** Refuses a completion policy the turn could never satisfy, as `run --complete-when` does. */
function checkCompletion(request: TurnRequest): void {
  if (request.completeWhen === 'code-change' && (request.verifyCommands ?? []).length === 0) {
    throw new ConfigError('config.verify_commands', 'completeWhen code-change needs verifyCommands, and none is given', {
      hint: 'pass verifyCommands: ["npm test"]: the commands whose passing run verifies a change',
    });
  }
  if (request.completeWhen === 'cited' && request.tools !== null && !request.tools.some((t) => RETRIEVING_TOOLS.includes(t))) {
    throw new ConfigError('config.complete_when', 'completeWhen cited needs a tool that retrieves evidence, and the turn\'s tools have none', {
      hint: `add ${RETRIEVING_TOOLS.join(', ')} (any of them) to tools, or leave tools out`,
    });
  }
}
