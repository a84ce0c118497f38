import type { Logger } from 'pino';
import type { ActorDirectory, DirectoryEntry } from '../../bus/directory.js';
import type { InboxConsumerOptions, InboxPort } from '../../bus/inbox-port.js';
import { Mailbox } from './mailbox.js';
import { WorkflowRun, type WorkflowRunPorts } from '../../jobs/workflow-run.js';
import { ActorloopError, StoreError } from '../../protocol/errors.js';
import type { ActorEvent, EventData, TurnSettings } from '../../protocol/events.js';
import type { ModelAdapter } from '../../model/model-port.js';
import { modelName } from '../../model/model-spec.js';
import { checkAnswer } from '../../model/output-schema.js';
import type { ModelNodeRequest } from '../../jobs/workflow-run.js';
import type { ActorLogs } from '../../store/log-port.js';
import type { JobPort } from '../agent/job-port.js';
import type { WorkflowPort } from '../agent/workflow-port.js';

/** What hosting workflow runs needs of the supervisor's ports. */
export interface WorkflowHostingDeps {
  directory: ActorDirectory;
  inbox: InboxPort;
  inboxOptions?: InboxConsumerOptions;
  logs: ActorLogs;
  /** The supervisor's jobs: each node's attempt is one, owned by the run. */
  jobs: JobPort;
  faults: { hit(point: string, actorId: string, epoch?: number): void };
  clock: { nowMs(): number };
  logger: Logger;
  onCommit?(actorId: string, events: ActorEvent[]): void;
  /** Builds a model adapter (the supervisor's): a model node's request is made through it (absent: model nodes fail). */
  modelFor?(settings: TurnSettings, cursor: number): Promise<ModelAdapter>;
  /** Makes sure the inbox watch is on (the supervisor's), before a run's mail is looked at. */
  listen(): Promise<void>;
}

interface HostedRun {
  run: WorkflowRun;
  mailbox: Mailbox;
}

/**
 * Makes a run known without hosting it: its log's `workflow/created` (fenced on an empty log, so
 * a start retried finds it and writes nothing) and its directory entry (kind `workflow`, status
 * `running`: a host claims it). The log first: whoever takes the entry finds the run's file in it.
 */
export async function createWorkflowRun(
  deps: Pick<WorkflowHostingDeps, 'logs' | 'directory' | 'clock' | 'logger'>, data: EventData<'workflow/created'>,
): Promise<void> {
  const id = data.runId;
  const end = await deps.logs.reader.end(data.rootId, id);
  if (end.seq === 0) {
    const life = new AbortController();
    const writer = deps.logs.writer({ rootId: data.rootId, actorId: id, position: end, epoch: 1, logger: deps.logger.child({ runId: id }), signal: life.signal });
    try {
      await writer.commit([{ type: 'workflow/created', data }]);
    } catch (err) {
      // another start of the same run wrote it first
      if (!(err instanceof StoreError && err.code === 'store.fenced')) throw err;
    } finally {
      life.abort();
    }
  }
  if (!(await deps.directory.get(id))) {
    const now = new Date(deps.clock.nowMs()).toISOString();
    await deps.directory.put({
      actorId: id, kind: 'workflow', parentId: data.ownerId, rootId: data.rootId, status: 'running', title: data.name,
      workspace: data.workspace, createdAt: now, updatedAt: now, labels: {},
    });
  }
}

/**
 * A supervisor's workflow runs (design §11b): each an actor of its own (its log, inbox, lease and
 * directory entry, kind `workflow`) run by `WorkflowRun`, its nodes' jobs started through the
 * supervisor's jobs. Created by `start` (a person's `actorloop workflow run`, an agent's
 * `start_workflow`), or taken over by a host (`hydrate`) when its holder died. Its jobs send their
 * notices to its inbox, which the supervisor's mail watch wakes.
 */
export class WorkflowHosting {
  private readonly hosted = new Map<string, HostedRun>();
  private readonly creating = new Map<string, Promise<void>>();
  private adopter: ((actorId: string) => Promise<number | null>) | null = null;
  private releaser: ((actorId: string) => Promise<void>) | null = null;
  private stopped = false;
  readonly port: WorkflowPort;

  constructor(private readonly deps: WorkflowHostingDeps) {
    this.port = { start: (data) => this.start(data) };
  }

  setAdopter(adopter: (actorId: string) => Promise<number | null>): void {
    this.adopter = adopter;
  }

  /** Who gives back the lease of a run that is over here. */
  setReleaser(release: (actorId: string) => Promise<void>): void {
    this.releaser = release;
  }

  hosts(runId: string): boolean {
    return this.hosted.has(runId);
  }

  /** The runs hosted here, for the tests. */
  runs(): WorkflowRun[] {
    return [...this.hosted.values()].map((h) => h.run);
  }

  /** Starts a run once, and hosts it here under a lease this process takes (another process holding it hosts it there). */
  start(data: EventData<'workflow/created'>): Promise<void> {
    const id = data.runId;
    if (this.hosted.has(id) || this.stopped) return Promise.resolve();
    let p = this.creating.get(id);
    if (!p) {
      p = this.startOnce(data).finally(() => this.creating.delete(id));
      this.creating.set(id, p);
    }
    return p;
  }

  private async startOnce(data: EventData<'workflow/created'>): Promise<void> {
    await createWorkflowRun(this.deps, data);
    const epoch = this.adopter ? await this.adopter(data.runId) : 2;
    if (epoch === null || this.hosted.has(data.runId) || this.stopped) return;
    await this.hydrateKnown(data.rootId, data.runId, epoch);
  }

  /** Hosts a run the directory has, from its log, under the lease `epoch` this host took. */
  /** Hosts a run of a tree this process runs, once, under the lease the adopter takes; nothing when another process holds it. */
  async adopt(entry: DirectoryEntry): Promise<void> {
    if (this.hosts(entry.actorId)) return;
    const epoch = this.adopter ? await this.adopter(entry.actorId) : 2;
    if (epoch === null) return;
    await this.hydrate(entry, epoch);
  }

  async hydrate(entry: DirectoryEntry, epoch: number): Promise<void> {
    if (this.hosted.has(entry.actorId)) return;
    await this.hydrateKnown(entry.rootId, entry.actorId, epoch);
  }

  private async hydrateKnown(rootId: string, runId: string, epoch: number): Promise<void> {
    const events: ActorEvent[] = [];
    let streamSeq = 0;
    for await (const e of this.deps.logs.reader.read(rootId, runId)) {
      events.push(e.event);
      streamSeq = e.streamSeq;
    }
    if (events[0]?.type !== 'workflow/created') throw new ActorloopError('workflow.not_a_run', `${runId} is not a workflow run: its log does not start with workflow/created`);
    const seq = events.at(-1)?.seq ?? 0;
    const highest = events.reduce((m, e) => Math.max(m, e.epoch), 0);
    const ports = this.portsFor(rootId, runId, Math.max(epoch, highest + 1), { seq, streamSeq });
    await this.deps.listen();
    // its inbox before its first job starts: the job's notice must find a consumer to deliver it
    await this.deps.inbox.ensure(runId, this.deps.inboxOptions);
    if (this.hosted.has(runId) || this.stopped) return;
    const run = WorkflowRun.hydrate(events, ports);
    const mailbox = new Mailbox({
      inbox: this.deps.inbox, logger: this.deps.logger, id: runId,
      live: () => !this.stopped && this.hosted.get(runId)?.run === run,
      // committed before the ack: a crash between them redelivers it, and the ended node ignores it
      receive: (msg, channel) => run.receive(msg, channel),
    });
    this.hosted.set(runId, { run, mailbox });
    this.wake(runId);
  }

  private portsFor(rootId: string, runId: string, epoch: number, position: { seq: number; streamSeq: number }): WorkflowRunPorts {
    const { deps } = this;
    const logger = deps.logger.child({ runId });
    const life = new AbortController();
    return {
      log: deps.logs.writer({ rootId, actorId: runId, position, epoch, logger, signal: life.signal }),
      startJob: (data) => deps.jobs.start(data),
      jobState: (root, jobId) => deps.jobs.state(root, jobId),
      cancelJob: (jobId, token) => deps.jobs.cancel(jobId, runId, 'user_cancelled', token),
      notify: async (msg) => {
        await deps.inbox.publish(msg, 'actor');
      },
      faults: { hit: (point, id) => deps.faults.hit(point, id, epoch) },
      clock: deps.clock,
      logger,
      ...(deps.jobs.timeoutSeconds !== undefined ? { timeoutSeconds: deps.jobs.timeoutSeconds } : {}),
      onCommit: (events) => deps.onCommit?.(runId, events),
      onFinished: () => void this.putStatus(runId),
      ...(deps.modelFor ? { askModel: (req: ModelNodeRequest) => this.askModel(req), checkAnswer } : {}),
    };
  }

  /** One request of a model node: no tools, its prompt alone; the answer's text. The cursor is its attempt's (a scripted model answers attempt n with its n-th response). */
  private async askModel(req: ModelNodeRequest): Promise<string | null> {
    const settings: TurnSettings = {
      model: req.model.spec, baseUrl: req.model.baseUrl, workspace: req.workspace, tools: [], instructions: '',
      budgets: { maxSteps: 1, maxToolCalls: 0, deadlineAt: null }, maxAttempts: 1, outputSchema: req.outputSchema,
    };
    const adapter = await this.deps.modelFor!(settings, req.attempt - 1);
    const prepared = adapter.prepare({
      model: modelName(req.model.spec),
      instructions: req.outputSchema ? 'Answer with only a JSON value matching the output schema.' : 'Answer the request.',
      tools: [], messages: req.messages, maxOutputTokens: null, outputSchema: req.outputSchema,
    });
    for await (const e of adapter.stream(prepared, req.signal)) if (e.type === 'done') return e.output.content;
    return null;
  }

  /** The run ended and its owner was told: its directory entry says how (a host need not take it on again). */
  private async putStatus(runId: string): Promise<void> {
    const h = this.hosted.get(runId);
    const ended = h?.run.state.ended;
    if (!ended) return;
    const entry = await this.deps.directory.get(runId).catch(() => undefined);
    const status = ended.outcome === 'succeeded' ? 'completed' : 'failed';
    if (entry && entry.status !== status) {
      await this.deps.directory.put({ ...entry, status, updatedAt: new Date(this.deps.clock.nowMs()).toISOString() })
        .catch((err: unknown) => this.deps.logger.warn({ err, runId }, 'workflow run status not written to the directory'));
    }
    await this.retire(runId);
  }

  /** A run that is over (ended, its owner told): once its inbox is read it stops being hosted here and its lease is given back. */
  private async retire(runId: string): Promise<void> {
    const h = this.hosted.get(runId);
    if (!h || !h.run.finished) return;
    h.mailbox.wake();
    await h.mailbox.settled();
    if (this.hosted.get(runId) !== h) return;
    this.hosted.delete(runId);
    h.mailbox.close();
    await this.releaser?.(runId).catch((err: unknown) => this.deps.logger.warn({ err, runId }, 'the lease of a finished workflow run was not given back; it lapses after its TTL'));
  }

  /** Mail came for a run hosted here: its inbox is read until nothing waits. */
  wake(runId: string): void {
    this.hosted.get(runId)?.mailbox.wake();
  }

  /** Every run hosted here looks at its inbox again (the mail watch resynced). */
  wakeAll(): void {
    for (const id of this.hosted.keys()) this.wake(id);
  }

  /** Stops hosting one run (its lease moved): nothing more is committed here. */
  evict(runId: string): void {
    const h = this.hosted.get(runId);
    if (!h) return;
    this.hosted.delete(runId);
    h.mailbox.close();
    h.run.stop();
  }

  /** Stops hosting every run: nothing committed (the next holder recovers them from their logs). */
  stop(): void {
    this.stopped = true;
    for (const h of this.hosted.values()) {
      h.mailbox.close();
      h.run.stop();
    }
    this.hosted.clear();
  }
}
