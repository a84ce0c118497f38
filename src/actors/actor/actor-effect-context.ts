import type { Logger } from 'pino';
import type { MachineSet } from './machine-set.js';
import type { ActorEvent, EventDraft } from '../../protocol/events.js';
import type { Projection } from '../../store/projection.js';
import type { AgentPorts } from '../agent/agent-ports.js';
import type { CommitPipeline } from './commit-pipeline.js';
import type { EffectContext, TurnCache } from '../agent/effect-context.js';
import type { OutputTexts } from '../agent/output-blobs.js';
import type { ToolRunner } from '../effects/tool-runner.js';

/** What the effect context reads of its actor: the members an `AgentActor` marks `@internal`. */
export interface EffectContextHost {
  readonly actorId: string;
  readonly rootId: string;
  readonly projection: Projection;
  readonly ports: AgentPorts;
  readonly turnAbort: AbortController;
  readonly halted: boolean;
  readonly turnCache: TurnCache;
  readonly outputs: OutputTexts;
  readonly pipeline: Pick<CommitPipeline, 'afterCommit' | 'noteRecovered' | 'hold'>;
  readonly machines: Pick<MachineSet, 'callState'>;
  readonly runner: Pick<ToolRunner, 'request'>;
  stage(d: EventDraft): ActorEvent;
  flush(): Promise<void>;
  send(signal: Parameters<EffectContext['send']>[0]): void;
  kick(): void;
  fail(err: unknown): void;
}

/**
 * The narrow view of an actor its effect handlers get (design §5): one object whose methods are
 * on its prototype, so a hosted agent carries one small object for it, not a closure a member.
 */
export class ActorEffectContext implements EffectContext {
  constructor(private readonly a: EffectContextHost) {}
  get actorId(): string {
    return this.a.actorId;
  }
  get rootId(): string {
    return this.a.rootId;
  }
  get projection(): Projection {
    return this.a.projection;
  }
  get ports(): AgentPorts {
    return this.a.ports;
  }
  get logger(): Logger {
    return this.a.ports.logger;
  }
  get epoch(): number {
    return this.a.ports.log.epoch;
  }
  get signal(): AbortSignal {
    return this.a.turnAbort.signal;
  }
  get halted(): boolean {
    return this.a.halted;
  }
  get turn(): TurnCache {
    return this.a.turnCache;
  }
  get outputs(): OutputTexts {
    return this.a.outputs;
  }
  stage(d: EventDraft): ActorEvent {
    return this.a.stage(d);
  }
  flush(): Promise<void> {
    return this.a.flush();
  }
  afterCommit(seq: number, launch: { run(): void; drop(): void }): void {
    this.a.pipeline.afterCommit(seq, launch);
  }
  holdCommit(write: Promise<unknown>): void {
    this.a.pipeline.hold(write);
  }
  noteRecovered(description: string): void {
    this.a.pipeline.noteRecovered(description);
  }
  send(signal: Parameters<EffectContext['send']>[0]): void {
    this.a.send(signal);
  }
  callState(callId: string): ReturnType<EffectContext['callState']> {
    return this.a.machines.callState(callId);
  }
  startCall(callId: string, rerun: boolean): void {
    this.a.runner.request(callId, rerun);
  }
  kick(): void {
    this.a.kick();
  }
  fail(err: unknown): void {
    this.a.fail(err);
  }
}
