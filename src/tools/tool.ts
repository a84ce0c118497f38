import type { Logger } from 'pino';
import type { z } from 'zod';
import type { ApprovalPreview } from '../protocol/events.js';

/**
 * How a tool may be recovered after a crash between `tool/start` and its end (design §7, §8).
 * The type makes "possible effects, no key, auto retry" impossible to write.
 */
export type ExecutionSemantics =
  | { effects: 'none'; retry: 'auto' | 'never' }
  | {
      effects: 'possible';
      recovery:
        | { kind: 'idempotent'; key: string }
        | { kind: 'reconcile' }
        | { kind: 'manual'; on: 'ask' | 'block' };
    };

/**
 * What a tool may do to the world, for the policy's defaults: `read` allows, `write` (workspace
 * files) asks, `execute` (processes) asks, `network` denies, unless a rule or the run mode says otherwise.
 */
export type SideEffectLevel = 'read' | 'write' | 'execute' | 'network';

/**
 * A resource a call touches. Keys are `path:<absolute path>` or `process` (a process can touch
 * anything, so it conflicts with every other key); two keys conflict when they overlap and one writes.
 */
export interface ResourceKey {
  key: string;
  mode: 'read' | 'write';
}

/** What planning a call (semantics, resources, plan) may look at: never the world's state beyond paths. */
export interface PlanContext {
  /** Absolute workspace root. */
  workspace: string;
}

/**
 * The normalized execution plan of one call: what an approval is bound to (by the digest of its
 * canonical JSON). Two calls with one plan do the same thing; a changed argument changes the plan.
 */
export interface ExecutionPlan {
  tool: string;
  version: string;
  /** Programs to run, each one simple command's argv after wrappers are seen through (shell only). */
  commands?: string[][];
  /** The command string as the model sent it (shell only). */
  command?: string;
  /** Working directory, relative to the workspace ("." for its root). */
  cwd?: string;
  /** Names (never values) of environment variables the process receives. */
  envNames?: string[];
  /** Paths touched, relative to the workspace, with their mode. */
  paths: Array<{ path: string; mode: 'read' | 'write' }>;
  /** Whether the call may reach the network. */
  network: boolean;
  /** The validated input, for tools whose plan is their arguments. */
  input?: unknown;
}

/**
 * What `preview` may look at: the plan context and the call's plan, how a process it starts
 * would run (the host's environment, whether bubblewrap contains it), and a signal that aborts
 * when the runtime stops waiting for the preview.
 */
export interface PreviewContext extends PlanContext {
  plan: ExecutionPlan;
  env: Readonly<Record<string, string>>;
  sandboxed: boolean;
  signal: AbortSignal;
}

/**
 * A tool's view of one call for the person approving it. The runtime redacts it and bounds its
 * text (`truncated`, `omitted`: the tool may have cut it already, and says what it left out).
 */
export type ToolPreview = Pick<ApprovalPreview, 'kind' | 'summary' | 'text'> & { truncated?: boolean; omitted?: string };

/** How shell-like tools are contained for this call (decided by the runtime and the policy). */
export interface SandboxGrant {
  /** Absolute path of bubblewrap, or null when it is not installed (the call then runs unsandboxed). */
  bwrapPath: string | null;
  /** Whether the process may reach the network (only when a policy rule allowed it). */
  network: boolean;
  /** Environment names allowed through even though they look secret (`*KEY*`, `*TOKEN*`, ...). */
  envAllow: string[];
  /** Host directories masked (empty) inside the sandbox: the runtime's data, the user's keys. */
  hide?: string[];
}

/** Reads stored artifacts (tool output too large to show in full) by ID. */
export interface ArtifactReader {
  /** The artifact's bytes, or undefined when no artifact of this actor has that ID. */
  read(id: string): Promise<Uint8Array | undefined>;
}

/** What a tool's `execute` receives besides its input. */
export interface ToolContext {
  workspace: string;
  callId: string;
  idempotencyKey: string;
  /** The actor's epoch, a fencing token for effects outside the log. */
  epoch: number;
  signal: AbortSignal;
  logger: Logger;
  /** The host's environment as configuration captured it (tools never read the environment themselves). */
  env: Readonly<Record<string, string>>;
  /** Containment for processes this call starts. */
  sandbox: SandboxGrant;
  /** This actor's artifacts, for `artifact_read`. */
  artifacts: ArtifactReader;
}

/**
 * The structured result of a tool: business failures are `ok: false` and the model sees them.
 * `output` may be bytes (process output that may be binary or huge): the pipeline redacts
 * secrets, and stores output over the observation budget as an artifact with a preview.
 */
export interface ToolResult {
  ok: boolean;
  /** The observation the model sees (after redaction and the observation budget). */
  output: string | Uint8Array;
  /** Why it failed; after an abort, `code` may be one of `TOOL_STOP_CODES` (see `ToolDefinition.execute`). */
  error?: { code: string; message: string };
}

/**
 * Error codes a tool answers an abort with (a `ToolError`'s code, or `error.code` of a returned
 * result), when settling alone does not say enough. See `ToolDefinition.execute`.
 */
export const TOOL_STOP_CODES = {
  /** It did nothing to the world: an effectful call that timed out then ends as a timeout, not `outcome_unknown`. */
  notApplied: 'tool.not_applied',
  /** It gave up waiting but cannot say its work stopped (a process escaped the kill): treated as not settled. */
  notStopped: 'tool.not_stopped',
} as const;

/** What a tool's `reconcile` receives besides the call's input. */
export interface ReconcileContext {
  workspace: string;
  callId: string;
  /** The key the call started with (a rerun after `not_applied` keeps it). */
  idempotencyKey: string;
  /** The recovering incarnation's epoch, the fencing token `execute` would get. */
  epoch: number;
  /** What `preimage` recorded in the call's last `tool/start`; undefined when it recorded nothing. */
  preimage: unknown;
  signal: AbortSignal;
  logger: Logger;
}

/**
 * What `reconcile` found: the call took effect (`output` is the observation its result carries),
 * it did not (the runtime runs it again under the same key), or nobody can tell (`reason` says why;
 * the call ends `tool/outcome_unknown` after a person confirmed).
 */
export type ReconcileVerdict =
  | { status: 'applied'; output: string }
  | { status: 'not_applied' }
  | { status: 'unknown'; reason: string };

/** A tool (design §8). `input` names are a contract with models and scripts. */
export interface ToolDefinition<I = unknown> {
  name: string;
  version: string;
  description: string;
  input: z.ZodType<I>;
  /** What the tool may do to the world; the policy's default decision follows from it. */
  level: SideEffectLevel;
  executionSemantics(input: I, ctx: PlanContext): ExecutionSemantics;
  resources(input: I, ctx: PlanContext): ResourceKey[];
  /**
   * The normalized execution plan (argv, cwd, env names, paths) an approval binds to. Without
   * it the plan is the validated input and the resource paths. May throw a ToolError for an
   * input that cannot be planned (an unparseable shell command): the call is then denied.
   */
  plan?(input: I, ctx: PlanContext): ExecutionPlan;
  /**
   * What a person approving the call is shown (a diff, the patch, the argv). It must change
   * nothing and bound its own reads; it runs once, when the approval is asked, off the policy's
   * path. Without it, or when it throws, the person is shown the plan (the arguments as JSON).
   */
  preview?(input: I, ctx: PreviewContext): ToolPreview | Promise<ToolPreview>;
  /**
   * Runs the call. When `ctx.signal` aborts (an interrupt, the turn's deadline, the call's
   * timeout) the tool should stop its work and settle within the runtime's grace (`cancelGraceMs`):
   * settling (a throw, or `ok: false`) after the abort confirms it stopped, and the call ends
   * `tool/cancelled`; `ok: true` is a result like any. A call with possible effects that does not
   * settle in time, or settles with `TOOL_STOP_CODES.notStopped`, ends `tool/outcome_unknown`,
   * never `cancelled`. After a timeout, an effectful call ends `outcome_unknown` unless it settles
   * with `TOOL_STOP_CODES.notApplied` (it changed nothing), which makes it a timeout result.
   */
  execute(input: I, ctx: ToolContext): Promise<ToolResult>;
  /**
   * Recovery `reconcile` (design §7): after a crash between `tool/start` and its end, looks at
   * the world and says whether the call took effect. It must change nothing (it may run again
   * if recovery itself is cut short). Required when `executionSemantics` can answer `reconcile`;
   * a throw counts as `unknown` with its message.
   */
  reconcile?(input: I, ctx: ReconcileContext): Promise<ReconcileVerdict>;
  /**
   * A small JSON record of what the call is about to change (a file's identity, say), taken in
   * the same tick its `tool/start` is staged and recorded in it, so `reconcile` can tell "never
   * ran" from "ran". Synchronous and cheap (a stat): it runs on the actor's loop. A throw records nothing.
   */
  preimage?(input: I, ctx: PlanContext): unknown;
  /** Default timeout of one execution (see `execute` for how an effectful call that times out ends). */
  timeoutMs?: number;
}
