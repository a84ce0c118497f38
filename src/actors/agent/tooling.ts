import type { PolicyRule, RunMode } from '../../tools/policy.js';
import type { Retriever } from '../../knowledge/retriever.js';
import type { TurnSettings } from '../../protocol/events.js';
import { createRedactor, type Redactor } from '../../tools/redact.js';
import { DEFAULT_OBSERVATION_BUDGET_BYTES } from '../../tools/observation.js';

/** What the tool pipeline needs beyond the registry: policy, sandbox, secrets, budgets (design §8). */
export interface ToolingPorts {
  /**
   * The policy in force for a turn now: read at every decision and recheck, so a rule added to a
   * config file before a call runs applies to it. A turn's own workspace decides which workspace
   * file counts (never the hosting process's directory), and its recorded settings are re-checked
   * against the files, the stricter winning.
   */
  policy(settings: TurnSettings): TurnPolicy;
  /** Absolute path of a working bubblewrap, or null: shell then runs unsandboxed and always asks. */
  bwrapPath: string | null;
  /** The host's environment as configuration captured it; processes get it with secrets stripped. */
  env: Readonly<Record<string, string>>;
  /** Redacts secrets from tool output before the model, the log and the logs see it. */
  redactor: Redactor;
  /** Tool output over this many bytes becomes an artifact with a preview. */
  observationBudgetBytes: number;
  /** How long an approval request stays open. */
  approvalTtlMs: number;
  /** How long an `ask_user` question waits for its answer. */
  askTtlMs: number;
  /** Calls of one step that may run at once. */
  maxParallelCalls: number;
  /** What an interrupt does to follow-ups queued for later turns: keeps them (default) or cancels them. */
  interruptFollowUps?: 'keep' | 'cancel';
  /** Host directories masked inside the sandbox (the data dir, ~/.ssh, ...). */
  hiddenPaths: string[];
  /**
   * The user's actorloop config dir (`$XDG_CONFIG_HOME/actorloop`): the user's AGENTS.md, skills
   * and memory files live there. Absent or null: no user-level docs, skills or memory.
   */
  userConfigDir?: string | null;
  /** Finds excerpts for a turn's task when its settings ask for some (`retrieval_tokens`); absent: none are. */
  retriever?: Retriever | null;
  /**
   * How long a started call whose signal aborted (interrupt, deadline, timeout) gets to settle
   * before it is abandoned; an effectful call abandoned unconfirmed ends `outcome_unknown`.
   * Default DEFAULT_CANCEL_GRACE_MS.
   */
  cancelGraceMs?: number;
}

/** The rules and run mode a call is decided by. */
export interface TurnPolicy {
  rules: PolicyRule[];
  mode: RunMode;
}

/** A policy of fixed rules, in the run mode each turn recorded (for tests and embedders without config files). */
export function staticPolicy(rules: PolicyRule[] = []): ToolingPorts['policy'] {
  return (settings) => ({ rules, mode: settings.approvalMode ?? 'ask' });
}

/** Default approval lifetime: a day, so a run that exits 4 overnight can still be approved. */
export const DEFAULT_APPROVAL_TTL_MS = 24 * 60 * 60 * 1000;
/** Default question lifetime: a day, as an approval's. */
export const DEFAULT_ASK_TTL_MS = 24 * 60 * 60 * 1000;
/** Default bound on calls of one step running at once. */
export const DEFAULT_MAX_PARALLEL_CALLS = 8;

/** Tooling with no rules (defaults by side-effect level), no sandbox, an empty environment. */
export function defaultTooling(over: Partial<ToolingPorts> = {}): ToolingPorts {
  return {
    policy: staticPolicy(),
    bwrapPath: null,
    env: {},
    redactor: createRedactor([]),
    observationBudgetBytes: DEFAULT_OBSERVATION_BUDGET_BYTES,
    approvalTtlMs: DEFAULT_APPROVAL_TTL_MS,
    askTtlMs: DEFAULT_ASK_TTL_MS,
    maxParallelCalls: DEFAULT_MAX_PARALLEL_CALLS,
    hiddenPaths: [],
    ...over,
  };
}
