import type { TurnSettings } from '../../protocol/events.js';
import type { Logger } from 'pino';
import type { StateValue } from 'xstate';
import type { MachineEvent } from '../../machines/machine-event.js';
import type { ModelAdapter, PreparedRequest } from '../../model/model-port.js';
import type { ActorEvent, EventDraft } from '../../protocol/events.js';
import type { Projection } from '../../store/projection.js';
import type { AgentPorts } from './agent-ports.js';
import type { Launch } from './commit-batch.js';
import type { OutputTexts } from './output-blobs.js';
import type { Assembly, ContextAssembler } from '../../context/assembly.js';

/** The ports an effect acts through: the agent's, less the log and snapshots (the commit pipeline's). */
export type EffectPorts = Omit<AgentPorts, 'log' | 'snapshots' | 'onCommit' | 'onHalt'>;

/** What the open turn keeps in memory: its model adapter and the step's prepared request. */
export interface TurnCache {
  /** The model adapter of the open turn, built on first use. */
  model: ModelAdapter | null;
  /** Prepared requests of this incarnation by digest, so an attempt need not re-read its blob. */
  readonly prepared: Map<string, PreparedRequest>;
  /** The output room of the attempt about to stream, when a budget reserved it (absent: none). */
  outputRoom?: { attemptId: string; tokens: number; budget: 'token_budget' | 'cost_budget' | 'goal_token_budget' | 'goal_cost_budget' } | null;
  /** The turn's request assembler (it keeps what it computed of history items) and the step's assembly. */
  context?: { assembler: ContextAssembler; texts: Map<string, string>; last: { digest: string; assembly: Assembly } | null };
}

/**
 * All an effect handler may touch of its agent (design §5): read the projection, stage events
 * and commit them, wait for a commit, watch the abort signal, use the ports. A handler never
 * sees the actor itself, so it can be run alone against a fake context.
 */
export interface EffectContext {
  readonly actorId: string;
  /** The top agent of the actor's tree (itself, for a top-level agent). */
  readonly rootId: string;
  /** The agent's projection. Read it; only staging changes it. */
  readonly projection: Projection;
  readonly ports: EffectPorts;
  readonly logger: Logger;
  /** The epoch of this incarnation: the fencing token handed to tools. */
  readonly epoch: number;
  /** Aborted when in-flight work of the open turn must stop (deadline, interrupt, shutdown). */
  readonly signal: AbortSignal;
  /** True once this incarnation stopped or failed: it commits nothing more. */
  readonly halted: boolean;
  readonly turn: TurnCache;
  /** Whole texts of blob-stored model output. */
  readonly outputs: OutputTexts;
  /** Stages one event: stamped, folded into the projection, routed to the machines. */
  stage(d: EventDraft): ActorEvent;
  /** Commits what is staged. */
  flush(): Promise<void>;
  /** Runs `launch.run` once the event at `seq` is committed; `drop` if it never will be. */
  afterCommit(seq: number, launch: Omit<Launch, 'seq'>): void;
  /**
   * The commit of what is staged (or staged next) waits for `write` (a blob an event names), and
   * is never made if it rejects: a commit never names a blob that is not written.
   */
  holdCommit(write: Promise<unknown>): void;
  /** Notes a closing event staged by recovery, for `recovery/continuation`. */
  noteRecovered(description: string): void;
  /** Sends a runtime signal to the machines. */
  send(signal: Exclude<MachineEvent, ActorEvent>): void;
  /** The state value of an open tool call's machine (undefined: not open). */
  callState(callId: string): StateValue | undefined;
  /** Asks the tool runner to start a call once its resources allow. */
  startCall(callId: string, rerun: boolean): void;
  /** Runs what the machines asked for and commits it (after work that ended off the effect pump). */
  kick(): void;
  /** Stops the agent on an error it cannot act past. */
  fail(err: unknown): void;
}

/** Why the effect was aborted: the reason its signal carries, else `cancelled`. */
export function abortReason(a: EffectContext): string {
  const r: unknown = a.signal.reason;
  return typeof r === 'string' ? r : 'cancelled';
}

/** The open turn and step: where the effect's events belong. */
export function scope(a: EffectContext): { turn: string; step: string } {
  return { turn: a.projection.openTurn!.id, step: a.projection.openStep!.id };
}

/** The open turn's settings. */
export function settings(a: EffectContext): TurnSettings {
  return a.projection.openTurn!.settings;
}
