import type { Logger } from 'pino';
import type { Effect } from '../machines/compiled-machine.js';
import { ActorloopError } from '../protocol/errors.js';
import type { ActorEvent, EventData, EventDraft } from '../protocol/events.js';
import { derivedId } from '../protocol/ids.js';
import type { InboxMessage } from '../protocol/inbox.js';
import { DEFAULT_JOB_LIMITS, isJobEnd, JobNoticeSchema, type JobNotice } from '../protocol/job-events.js';
import { nodeJobIdOf } from '../protocol/workflow-events.js';
import type { JobState } from '../store/job-projection.js';
import type { ActorLogWriter } from '../store/log-port.js';
import type { StartNodeParams } from './workflow-graph.js';
import { checkModelOutput, retryMessage, type AnswerCheck } from './workflow-output.js';
import type { WorkflowNode } from './workflow-file.js';
import { createRunState, foldRunEvent, foldRunLog, machineOutcome, runNodes, type WorkflowRunState } from './workflow-state.js';

// The workflow run actor (design §11b): one run's machine over its own log. Each node's attempt
// runs as a job of its own (owner: the run), started through `startJob` with an ID derived from
// (run, node, attempt), so a start asked for again after a crash names the same job. The job's
// end comes back as a `job_notice` in the run's inbox, and `node/ended` is committed before the
// machine is told: dependents are started only from the committed result. A host that takes the
// run over replays the log (no effects), then `recover` asks again for every node not ended: a
// node started and not ended has its job looked up (ended: its end is committed from the job's
// log; running: its notice is waited for), one never started is started. A node with
// `node/ended` is never run again.
//
// The run is, to its owner (an agent's `start_workflow`), a job: its end is a `job_notice` whose
// `jobId` is the run's ID, so the owner's model reads it, `wait_jobs` takes it and the owner's
// projection records it as it does a job's. A person's run (no owner) is followed from its log.

/** What agent nodes (and model nodes on a host without a model) get: this runtime does not run them. */
export const NODE_KIND_UNSUPPORTED = 'this runtime does not run model/agent nodes yet; make it a shell node';

/** One model node's request: its prompt (and, on a retry, why the last answer was refused). */
export interface ModelNodeRequest {
  model: { spec: string; baseUrl: string | null };
  workspace: string;
  node: string;
  attempt: number;
  messages: Array<{ role: 'user'; content: string }>;
  outputSchema: Record<string, unknown> | null;
  signal: AbortSignal;
}

/** What a workflow run acts through: its log, the job starter, the owner's inbox. */
export interface WorkflowRunPorts {
  log: ActorLogWriter;
  /** Creates a node's job once (idempotent by its ID), hosted wherever its lease is taken. */
  startJob(data: EventData<'job/created'>): Promise<void>;
  /** A job's state from its own log; null when no job has that ID. */
  jobState(rootId: string, jobId: string): Promise<JobState | null>;
  /** Asks a node's job to stop (a message from the run, its owner, to the job's inbox; its ID derived from `token`). */
  cancelJob(jobId: string, token: string): Promise<void>;
  /** Publishes the run's end to its owner's inbox on the actors' channel. */
  notify(msg: InboxMessage): Promise<void>;
  faults: { hit(point: string, actorId: string): void };
  clock: { nowMs(): number };
  logger: Logger;
  /** How long a shell node runs when it names no `timeout_seconds`. */
  timeoutSeconds?: number;
  onCommit?(events: ActorEvent[]): void;
  /** Called once the run ended and its owner (if any) has its notice. */
  onFinished?(): void;
  /** One model request for a model node: its answer's text (absent: this host runs no model nodes). */
  askModel?(req: ModelNodeRequest): Promise<string | null>;
  /** `checkAnswer` of src/model/output-schema.ts (this room may not import src/model). */
  checkAnswer?: AnswerCheck;
}

/** The message ID of a run's notice to its owner: derived, so a notice sent again is deduped. */
export function workflowNoticeMessageId(runId: string): string {
  return derivedId('message', 'workflow-notice', runId);
}

/** A node's `node/ended` from how its job ended: a shell node succeeded iff its job completed with exit code 0. */
export function nodeEndOf(node: string, attempt: number, n: Pick<JobNotice, 'phase' | 'reason' | 'message' | 'exitCode' | 'output'>): EventData<'node/ended'> {
  const result = { exitCode: n.exitCode, output: n.output };
  if (n.phase === 'completed' && n.exitCode === 0) return { node, attempt, outcome: 'succeeded', result };
  const why = n.phase === 'completed' || (n.phase === 'failed' && n.reason === 'exited' && n.exitCode !== null)
    ? `its command exited with code ${n.exitCode}`
    : `its job ended ${n.phase} (${n.reason}${n.message ? `: ${n.message}` : ''})`;
  return { node, attempt, outcome: 'failed', result, error: why };
}

/** One workflow run hosted in this process. */
export class WorkflowRun {
  readonly runId: string;
  readonly rootId: string;
  private readonly queue: Array<Effect | { name: 'end' }> = [];
  private running = false;
  private chain: Promise<void> = Promise.resolve();
  private readonly life = new AbortController();
  private idle: Promise<void> = Promise.resolve();
  private settle: () => void = () => {};
  private notified = false;

  private constructor(private readonly ports: WorkflowRunPorts, readonly state: WorkflowRunState) {
    this.runId = state.created.runId;
    this.rootId = state.created.rootId;
  }

  /** A new run: commits its `workflow/created`, then starts the nodes that need nothing. */
  static async create(data: EventData<'workflow/created'>, ports: WorkflowRunPorts): Promise<WorkflowRun> {
    const [created] = await ports.log.commit([{ type: 'workflow/created', data }]);
    ports.onCommit?.([created!]);
    const fx: Effect[] = [];
    const run = new WorkflowRun(ports, createRunState(created as Extract<ActorEvent, { type: 'workflow/created' }>, (f) => fx.push(f)));
    run.enqueue(fx);
    return run;
  }

  /** A run taken over from its log: replayed without effects, then recovered (every node not ended is asked for again). */
  static hydrate(events: ActorEvent[], ports: WorkflowRunPorts): WorkflowRun {
    const state = foldRunLog(events);
    if (!state) throw new ActorloopError('workflow.not_a_run', `the log of ${ports.log.actorId} does not start with workflow/created`);
    const run = new WorkflowRun(ports, state);
    if (state.ended) run.enqueue([{ name: 'notify', params: {} }]);
    else {
      run.send({ type: 'recover' });
      // cancelled before the last holder died: its running nodes' jobs are asked to stop again
      if (run.cancelled) void run.exclusive(() => run.stopRunningJobs()).catch(() => {});
    }
    return run;
  }

  /** True once the run ended and its owner (if any) has the notice. */
  get finished(): boolean {
    return this.state.ended !== null && (this.state.created.ownerId === null || this.notified);
  }

  /** Settles once no effect is running or waiting. */
  settled(): Promise<void> {
    return this.idle;
  }

  /**
   * Mail for the run: a node's job's `job_notice` ends that node's attempt (committed, then the
   * machine starts what it unblocks). A notice of a job the log never started, or of an attempt
   * that already ended (a redelivery), changes nothing. Resolves once what it changed is committed.
   */
  receive(msg: InboxMessage, channel: 'person' | 'actor'): Promise<void> {
    const cancel = (channel === 'person' && msg.kind === 'interrupt')
      || (channel === 'actor' && msg.kind === 'subagent_interrupt' && msg.from === this.state.created.ownerId);
    if (cancel) return this.exclusive(() => this.cancel(msg));
    if (msg.kind !== 'job_notice' || channel !== 'actor') {
      this.ports.logger.warn({ runId: this.runId, kind: msg.kind, from: msg.from, channel }, 'workflow run mail ignored: a run takes only its jobs\' notices');
      return Promise.resolve();
    }
    let notice: JobNotice;
    try {
      notice = JobNoticeSchema.parse(JSON.parse(msg.content));
    } catch (err) {
      this.ports.logger.warn({ err, runId: this.runId, messageId: msg.id }, 'malformed job notice ignored');
      return Promise.resolve();
    }
    return this.exclusive(async () => {
      const of = this.state.jobs.get(notice.jobId);
      if (!of || notice.jobId !== msg.from) {
        this.ports.logger.warn({ runId: this.runId, jobId: notice.jobId }, 'notice of a job this run did not start ignored');
        return;
      }
      await this.endNode(nodeEndOf(of.node, of.attempt, notice));
    });
  }

  /**
   * A stop asked for by a person or the run's owner: committed (once), then each running node's
   * job is asked to stop; what has not started is skipped, and the run ends `cancelled` once every
   * running node ended as its job did.
   */
  private async cancel(msg: InboxMessage): Promise<void> {
    if (this.state.ended) return;
    if (!this.cancelled) await this.commit([{ type: 'workflow/cancel_requested', data: { by: msg.from, messageId: msg.id } }]);
    await this.stopRunningJobs();
  }

  private get cancelled(): boolean {
    return (this.state.snap.context as { cancelled?: boolean }).cancelled === true;
  }

  /** Asks the job of every running node to stop (idempotent by ID: asked again after a takeover). */
  private async stopRunningJobs(): Promise<void> {
    for (const [jobId, { node, attempt }] of this.state.jobs) {
      const n = this.state.snap.context.nodes[node] as { status: string; attempt: number } | undefined;
      if (n?.status !== 'running' || n.attempt !== attempt) continue;
      await this.ports.cancelJob(jobId, this.runId).catch((err: unknown) => this.ports.logger.warn({ err, runId: this.runId, jobId }, 'cancel of a node\'s job not sent; it runs to its own end'));
    }
  }

  /** Stops hosting the run here: nothing more is committed; its jobs run on under their own leases. */
  stop(): void {
    this.life.abort();
  }

  /** One piece of work on the log at a time: effects and notices never commit at once. */
  private exclusive(fn: () => Promise<void>): Promise<void> {
    const next = this.chain.then(() => (this.life.signal.aborted ? Promise.reject(new ActorloopError('workflow.stopped', `workflow run ${this.runId} is no longer hosted here`)) : fn()));
    this.chain = next.catch(() => {});
    return next;
  }

  /** A fault point: a `drop` there stops the run where it is (nothing after it runs here). */
  private hit(point: string): void {
    try {
      this.ports.faults.hit(point, this.runId);
    } catch (err) {
      this.life.abort();
      throw err;
    }
  }

  private async commit(drafts: EventDraft[]): Promise<ActorEvent[]> {
    if (this.life.signal.aborted) throw new ActorloopError('workflow.stopped', `workflow run ${this.runId} is no longer hosted here`);
    const events = await this.ports.log.commit(drafts);
    this.ports.onCommit?.(events);
    for (const e of events) this.send(e);
    return events;
  }

  private send(e: ActorEvent | { type: 'recover' }): void {
    const fx: Effect[] = [];
    if (e.type === 'recover') this.state.snap = this.state.engine.transition(this.state.snap, e, (f) => fx.push(f));
    else foldRunEvent(this.state, e, (f) => fx.push(f));
    this.enqueue(fx);
    if (!this.state.ended && machineOutcome(this.state) && !this.queue.some((f) => f.name === 'end')) this.enqueue([{ name: 'end', params: {} }]);
  }

  private enqueue(fx: Effect[]): void {
    this.queue.push(...fx);
    if (this.running || this.queue.length === 0) return;
    this.running = true;
    this.idle = new Promise<void>((r) => (this.settle = r));
    void this.drain();
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0 && !this.life.signal.aborted) {
        const f = this.queue.shift()!;
        try {
          await this.exclusive(() => this.run(f as Effect));
        } catch (err) {
          if (this.life.signal.aborted) break;
          // the log unreachable: the next holder's recover asks for it again
          this.ports.logger.error({ err, runId: this.runId, effect: f.name }, 'workflow effect failed; the run waits for its next holder');
          this.life.abort();
          break;
        }
      }
    } finally {
      this.running = false;
      this.settle();
    }
  }

  private run(f: Effect): Promise<void> {
    switch (f.name) {
      case 'startNode':
        return this.startNode(f.params as StartNodeParams);
      case 'end':
        return this.end();
      case 'notify':
        return this.notifyOwner();
      default:
        throw new Error(`workflow run effect ${f.name} has no handler`);
    }
  }

  private async endNode(data: EventData<'node/ended'>): Promise<void> {
    const n = this.state.snap.context.nodes[data.node] as { status: string; attempt: number } | undefined;
    // ended already, or another attempt's: a late duplicate
    if (!n || n.attempt !== data.attempt || ['succeeded', 'failed', 'skipped'].includes(n.status)) return;
    await this.commit([{ type: 'node/ended', data }]);
    // the result is in the log, its dependents not yet started
    this.hit('after:node/ended');
  }

  private async startNode({ node, attempt }: StartNodeParams): Promise<void> {
    const { created, workflow } = this.state;
    const def = workflow.nodes.find((n) => n.id === node)!;
    const jobId = nodeJobIdOf(this.runId, node, attempt);
    if (def.run === 'model' && this.ports.askModel && this.ports.checkAnswer) return this.startModelNode(def, attempt);
    if (def.run !== 'shell') {
      await this.endNode({ node, attempt, outcome: 'failed', error: `node ${node} is a ${def.run} node: ${NODE_KIND_UNSUPPORTED}` });
      return;
    }
    // started before its job exists: a crash between them finds node/started and starts the same job
    if (this.state.started.get(node) !== attempt) await this.commit([{ type: 'node/started', data: { node, attempt, jobId } }]);
    await this.ports.startJob({
      jobId, ownerId: this.runId, rootId: this.rootId, name: `${workflow.name}.${node}`,
      executor: {
        kind: 'shell', command: def.command!, cwd: created.cwd, workspace: created.workspace,
        timeoutSeconds: def.timeout_seconds ?? this.ports.timeoutSeconds ?? DEFAULT_JOB_LIMITS.timeoutSeconds,
        network: false, envAllow: [],
      },
      // a node's retries are the run's (a new attempt, a new job): a lost execution is checked, never rerun
      idempotent: false, retries: 0, effects: 'possible', onOwnerEnd: 'detach', resources: [],
      callId: derivedId('call', 'workflow', this.runId, node, String(attempt)),
    });
    // taken over after a crash: a job that ended already may have sent its notice to a holder
    // that died before committing it; its own log says how it ended
    const s = await this.ports.jobState(this.rootId, jobId);
    if (s && isJobEnd(s.phase)) {
      await this.endNode(nodeEndOf(node, attempt, { phase: s.phase, reason: s.reason ?? 'exited', message: s.message, exitCode: s.end?.exitCode ?? null, output: s.end?.output ?? null }));
    }
  }

  /**
   * A model node's attempt: one request, its answer checked against the node's `output_schema`
   * (a refused answer fails the attempt, and a retry is sent why). Nothing of it is logged but its
   * start and its end: after a crash between them the request is made again (it changes nothing).
   * Asked outside the run's turn on the log, so other nodes' ends are committed meanwhile.
   */
  private async startModelNode(def: WorkflowNode, attempt: number): Promise<void> {
    const node = def.id;
    const model = this.state.created.model ?? null;
    if (model === null) {
      await this.endNode({ node, attempt, outcome: 'failed', error: `node ${node} is a model node and the run was given no model; start it with --model <spec> (or set default_model)` });
      return;
    }
    if (this.state.started.get(node) !== attempt) {
      await this.commit([{ type: 'node/started', data: { node, attempt, jobId: derivedId('attempt', 'workflow', this.runId, node, String(attempt)) } }]);
    }
    const previous = attempt > 1 ? (this.state.snap.context.nodes[node] as { error?: string }).error : undefined;
    const messages = [{ role: 'user' as const, content: def.prompt! }];
    if (previous !== undefined) messages.push({ role: 'user', content: retryMessage(previous) });
    void (async () => {
      let data: EventData<'node/ended'>;
      try {
        const content = await this.ports.askModel!({
          model, workspace: this.state.created.workspace, node, attempt, messages, outputSchema: def.output_schema ?? null, signal: this.life.signal,
        });
        const out = checkModelOutput(def.output_schema, content, this.ports.checkAnswer!);
        data = out.ok ? { node, attempt, outcome: 'succeeded', result: out.value } : { node, attempt, outcome: 'failed', error: out.error };
      } catch (err) {
        if (this.life.signal.aborted) return;
        data = { node, attempt, outcome: 'failed', error: `its model request failed: ${err instanceof Error ? err.message : String(err)}` };
      }
      await this.exclusive(() => this.endNode(data));
    })().catch((err: unknown) => {
      if (this.life.signal.aborted) return;
      this.ports.logger.error({ err, runId: this.runId, node }, 'model node end not committed; the run waits for its next holder');
      this.life.abort();
    });
  }

  private async end(): Promise<void> {
    const outcome = machineOutcome(this.state);
    if (!outcome || this.state.ended) return;
    await this.commit([{ type: 'workflow/ended', data: outcome }]);
    await this.notifyOwner();
  }

  /** The run's end to its owner, as a job's notice (its ID derived from the run's: sent again, it is deduped). */
  private async notifyOwner(): Promise<void> {
    const { created, ended } = this.state;
    if (!ended) return;
    if (created.ownerId !== null && !this.notified) {
      const nodes = runNodes(this.state);
      const tail = nodes.map((n) => `${n.id}: ${n.status}${n.attempt > 1 ? ` (attempt ${n.attempt})` : ''}${n.error ? ` · ${n.error}` : ''}${n.jobId ? ` · ${n.jobId}` : ''}`).join('\n');
      const notice: JobNotice = {
        jobId: this.runId, name: `workflow ${created.name}`,
        phase: ended.outcome === 'succeeded' ? 'completed' : ended.outcome === 'cancelled' ? 'cancelled' : 'failed',
        reason: ended.outcome === 'cancelled' ? 'user_cancelled' : 'exited',
        message: ended.failed.length > 0 ? `nodes ${ended.failed.join(', ')} failed` : null,
        attempts: 1, exitCode: null, durationMs: Math.max(0, (this.state.endedAt ?? this.state.createdAt) - this.state.createdAt),
        usage: null, output: null, tail,
      };
      await this.ports.notify({
        id: workflowNoticeMessageId(this.runId), from: this.runId, to: created.ownerId, kind: 'job_notice', target: 'next_step', wakeup: true,
        content: JSON.stringify(notice), request: null, sentAt: new Date(this.ports.clock.nowMs()).toISOString(),
      });
    }
    this.notified = true;
    this.ports.onFinished?.();
  }
}
