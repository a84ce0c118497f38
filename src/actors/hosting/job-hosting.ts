import type { Logger } from 'pino';
import type { ActorDirectory, DirectoryEntry } from '../../bus/directory.js';
import type { InboxConsumerOptions, InboxPort } from '../../bus/inbox-port.js';
import { Mailbox } from './mailbox.js';
import { liveSubject } from '../../bus/subjects.js';
import type { LivePublisher } from '../../bus/log-publisher.js';
import { JobActor, type JobActorPorts } from '../../jobs/job-actor.js';
import type { JobSlotStore } from '../../jobs/job-slot-port.js';
import type { ResourceLeaseStore } from '../../bus/resource-lease-port.js';
import type { JobScheduler } from '../../jobs/scheduler.js';
import { ActorloopError } from '../../protocol/errors.js';
import type { ActorEvent, EventData } from '../../protocol/events.js';
import { derivedId } from '../../protocol/ids.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import { isJobEnd } from '../../protocol/job-events.js';
import type { BlobStore } from '../../store/blob-port.js';
import { foldJobLog, type JobState } from '../../store/job-projection.js';
import type { ActorLogs } from '../../store/log-port.js';
import type { ToolingPorts } from '../agent/tooling.js';
import type { JobPort } from '../agent/job-port.js';

/** What hosting jobs needs of the supervisor's ports. */
export interface JobHostingDeps {
  hostId: string;
  directory: ActorDirectory;
  inbox: InboxPort;
  inboxOptions?: InboxConsumerOptions;
  logs: ActorLogs;
  live: LivePublisher;
  blobs: BlobStore;
  scheduler: JobScheduler;
  slots: JobSlotStore;
  /** Where jobs lease their named resources (absent: recorded, not held). */
  resources?: ResourceLeaseStore;
  tooling: ToolingPorts;
  faults: { hit(point: string, actorId: string, epoch?: number): void };
  clock: { nowMs(): number };
  logger: Logger;
  killGraceMs?: number;
  /** How long a job runs when its `start_job` names no timeout. */
  timeoutSeconds?: number;
  onCommit?(actorId: string, events: ActorEvent[]): void;
  /** Makes sure the inbox watch is on (the supervisor's), before a job's mail is looked at. */
  listen(): Promise<void>;
}

interface HostedJob {
  actor: JobActor;
  mailbox: Mailbox;
}

/** The directory status a job's phase shows (a job owed its notice is `running`: a host must take it on). */
function statusOf(s: JobState): DirectoryEntry['status'] {
  if (!isJobEnd(s.phase) || s.notified === null) return 'running';
  return s.phase === 'interrupted' ? 'stopped' : s.phase;
}

/**
 * A supervisor's jobs (design §5, §11b): each an actor of its own (its log, inbox, lease and
 * directory entry, kind `job`) run by `JobActor` under this host's scheduler. Created by an
 * owner's `start_job` through `port`, or taken over by a host (`hydrate`) when its holder died.
 */
export class JobHosting {
  private readonly hosted = new Map<string, HostedJob>();
  private readonly creating = new Map<string, Promise<void>>();
  private adopter: ((actorId: string) => Promise<number | null>) | null = null;
  private releaser: ((actorId: string) => Promise<void>) | null = null;
  private stopped = false;
  private labelTimer: NodeJS.Timeout | null = null;
  readonly port: JobPort;

  constructor(private readonly deps: JobHostingDeps) {
    this.port = {
      start: (data) => this.start(data),
      state: (rootId, jobId) => this.state(rootId, jobId),
      cancel: (jobId, ownerId, reason, token) => this.cancelFromOwner(jobId, ownerId, reason, token),
      position: (jobId) => this.deps.scheduler.position(jobId),
      ...(deps.timeoutSeconds !== undefined ? { timeoutSeconds: deps.timeoutSeconds } : {}),
    };
  }

  setAdopter(adopter: (actorId: string) => Promise<number | null>): void {
    this.adopter = adopter;
  }

  /** Who gives back the lease of a job that is over here (a host, a command's lease keeper). */
  setReleaser(release: (actorId: string) => Promise<void>): void {
    this.releaser = release;
  }

  hosts(jobId: string): boolean {
    return this.hosted.has(jobId);
  }

  /** The jobs hosted here, for a drain's wait and the tests. */
  jobs(): JobActor[] {
    return [...this.hosted.values()].map((h) => h.actor);
  }

  /** A job's state from its log (wherever it is hosted); null when no job has that ID. */
  async state(rootId: string, jobId: string): Promise<JobState | null> {
    const h = this.hosted.get(jobId);
    if (h) return structuredClone(h.actor.state);
    const events: ActorEvent[] = [];
    for await (const { event } of this.deps.logs.reader.read(rootId, jobId)) events.push(event);
    return foldJobLog(events);
  }

  /**
   * Starts a job once: its directory entry, its `job/created`, and its hosting here under a lease
   * this process takes (another process holding it hosts it there). A start retried after a
   * crash finds the job's log and changes nothing.
   */
  start(data: EventData<'job/created'>): Promise<void> {
    const id = data.jobId;
    if (this.hosted.has(id) || this.stopped) return Promise.resolve();
    let p = this.creating.get(id);
    if (!p) {
      p = this.startOnce(data).finally(() => this.creating.delete(id));
      this.creating.set(id, p);
    }
    return p;
  }

  /**
   * The job's log first, then its directory entry, then its hosting: an entry (which hosts claim)
   * always has a log to replay, and a start retried after a crash at any point finds what it made.
   * `job/created` is committed before any lease is taken, at epoch 1 on an empty subject (fenced:
   * of two starts racing, one lands and the other reads it); its holder's epochs are higher.
   */
  private async startOnce(data: EventData<'job/created'>): Promise<void> {
    const id = data.jobId;
    let end = await this.deps.logs.reader.end(data.rootId, id);
    if (end.seq === 0) {
      const writer = this.deps.logs.writer({ rootId: data.rootId, actorId: id, position: end, epoch: 1, logger: this.deps.logger.child({ jobId: id }) });
      try {
        const created = await writer.commit([{ type: 'job/created', data }]);
        this.deps.onCommit?.(id, created);
      } catch (err) {
        // another start made it first: its log is the job's
        if (!(err instanceof ActorloopError && err.code === 'store.fenced')) throw err;
      }
      end = await this.deps.logs.reader.end(data.rootId, id);
    }
    const known = await this.deps.directory.get(id);
    if (!known) {
      const now = new Date(this.deps.clock.nowMs()).toISOString();
      const ex = data.executor;
      await this.deps.directory.put({
        actorId: id, kind: 'job', parentId: data.ownerId, rootId: data.rootId, status: 'running', title: data.name,
        workspace: ex.kind === 'shell' ? ex.cwd : '', createdAt: now, updatedAt: now, labels: {},
      });
    }
    const epoch = this.adopter ? await this.adopter(id) : 2;
    // another process holds its lease: it hosts the job (a host finds it by its directory status)
    if (epoch === null || this.hosted.has(id) || this.stopped) return;
    // replayed like a job taken over: `recover` in pending asks for its first execution
    await this.hydrateKnown(data.rootId, id, epoch);
  }

  /** Hosts a job of a tree this process runs, once, under the lease the adopter takes; nothing when another process holds it. */
  async adopt(entry: DirectoryEntry): Promise<void> {
    if (this.hosted.has(entry.actorId) || this.stopped) return;
    const epoch = this.adopter ? await this.adopter(entry.actorId) : 1;
    if (epoch === null) return;
    await this.hydrate(entry, epoch);
  }

  /** Hosts a job the directory has, from its log, under the lease `epoch` this host took. */
  async hydrate(entry: DirectoryEntry, epoch: number): Promise<void> {
    if (this.hosted.has(entry.actorId)) return;
    await this.hydrateKnown(entry.rootId, entry.actorId, epoch);
  }

  private async hydrateKnown(rootId: string, jobId: string, epoch: number): Promise<void> {
    const events: ActorEvent[] = [];
    let streamSeq = 0;
    for await (const e of this.deps.logs.reader.read(rootId, jobId)) {
      events.push(e.event);
      streamSeq = e.streamSeq;
    }
    const seq = events.at(-1)?.seq ?? 0;
    const highest = events.reduce((m, e) => Math.max(m, e.epoch), 0);
    const ports = this.portsFor(rootId, jobId, Math.max(epoch, highest + 1), { seq, streamSeq });
    await this.deps.listen();
    const actor = JobActor.hydrate(events, ports);
    // a job that ended here with its notice recorded has nothing left to do; its place in the tree is given back
    if (isJobEnd(actor.state.phase)) await this.deps.slots.release(rootId, jobId).catch(() => {});
    await this.serve(actor);
  }

  private portsFor(rootId: string, jobId: string, epoch: number, position: { seq: number; streamSeq: number }): JobActorPorts {
    const { deps } = this;
    const t = deps.tooling;
    const life = new AbortController();
    return {
      log: deps.logs.writer({ rootId, actorId: jobId, position, epoch, logger: deps.logger.child({ jobId }), signal: life.signal }),
      blobs: deps.blobs,
      scheduler: deps.scheduler,
      hostId: deps.hostId,
      notify: async (msg) => {
        await deps.inbox.publish(msg, 'actor');
      },
      shell: { env: t.env, sandbox: { bwrapPath: t.bwrapPath, network: false, envAllow: [], hide: t.hiddenPaths } },
      redact: (text) => t.redactor.redact(text).text,
      live: (text) => deps.live.publish(liveSubject(rootId, jobId), JSON.stringify({ type: 'job/output', text })),
      faults: { hit: (point, id) => deps.faults.hit(point, id, epoch) },
      clock: deps.clock,
      logger: deps.logger.child({ jobId }),
      ...(deps.killGraceMs !== undefined ? { killGraceMs: deps.killGraceMs } : {}),
      onCommit: (events) => this.committed(rootId, jobId, events),
      onQueue: () => this.queueChanged(),
      ...(deps.resources ? { resources: deps.resources } : {}),
    };
  }

  private committed(rootId: string, jobId: string, events: ActorEvent[]): void {
    this.deps.onCommit?.(jobId, events);
    const h = this.hosted.get(jobId);
    if (!h) return;
    const ended = events.some((e) => e.type === 'job/phase' && isJobEnd(e.data.phase));
    if (ended) void this.deps.slots.release(rootId, jobId).catch(() => {});
    if (events.some((e) => e.type === 'job/notified' || e.type === 'job/phase')) void this.putStatus(h.actor.state);
    if (events.some((e) => e.type === 'job/notified')) void this.retire(jobId);
  }

  /**
   * A job that ended and whose owner has its notice is over: once its inbox is read, it stops being
   * hosted here and its lease is given back, so a host does not keep (and renew) a lease for every
   * job it ever ran. Mail that comes later (a late cancel) has it hosted again for as long as it
   * takes to read it.
   */
  private async retire(jobId: string): Promise<void> {
    const h = this.hosted.get(jobId);
    if (!h || !h.actor.finished) return;
    h.mailbox.wake();
    await h.mailbox.settled();
    if (this.hosted.get(jobId) !== h) return;
    this.hosted.delete(jobId);
    h.mailbox.close();
    await h.actor.settled();
    // its entry says it is over before its lease goes: an entry left `running` (its last holder
    // exited before writing it) would have every host take the job on again, pass after pass
    await this.putStatus(h.actor.state);
    await this.releaser?.(jobId).catch((err: unknown) => this.deps.logger.warn({ err, jobId }, 'the lease of a finished job was not given back; it lapses after its TTL'));
  }

  private async putStatus(s: JobState): Promise<void> {
    const entry = await this.deps.directory.get(s.jobId).catch(() => undefined);
    if (!entry) return;
    const status = statusOf(s);
    const { queuePosition: _q, ...labels } = entry.labels;
    if (entry.status === status && _q === undefined) return;
    await this.deps.directory.put({ ...entry, status, labels, updatedAt: new Date(this.deps.clock.nowMs()).toISOString() })
      .catch((err: unknown) => this.deps.logger.warn({ err, jobId: s.jobId }, 'job status not written to the directory'));
  }

  /** Writes the queue positions into the waiting jobs' directory entries, at most every 200 ms. */
  private queueChanged(): void {
    if (this.labelTimer || this.stopped) return;
    this.labelTimer = setTimeout(() => {
      this.labelTimer = null;
      void this.writePositions();
    }, 200);
    this.labelTimer.unref?.();
  }

  private async writePositions(): Promise<void> {
    for (const q of this.deps.scheduler.queued()) {
      const entry = await this.deps.directory.get(q.jobId).catch(() => undefined);
      if (!entry || entry.labels.queuePosition === String(q.position)) continue;
      await this.deps.directory.put({ ...entry, labels: { ...entry.labels, queuePosition: String(q.position) } }).catch(() => {});
    }
    for (const r of this.deps.scheduler.running()) {
      const entry = await this.deps.directory.get(r.jobId).catch(() => undefined);
      if (!entry || entry.labels.queuePosition === undefined) continue;
      const { queuePosition: _q, ...labels } = entry.labels;
      await this.deps.directory.put({ ...entry, labels }).catch(() => {});
    }
  }

  private async serve(actor: JobActor): Promise<void> {
    const mailbox = new Mailbox({
      inbox: this.deps.inbox, logger: this.deps.logger, id: actor.jobId,
      live: () => !this.stopped && this.hosted.get(actor.jobId)?.actor === actor,
      receive: (msg, channel) => actor.receive(msg, channel),
    });
    this.hosted.set(actor.jobId, { actor, mailbox });
    // over already (taken over after its notice was recorded, or hosted again for late mail)
    if (actor.finished) void this.retire(actor.jobId);
    await this.deps.inbox.ensure(actor.jobId, this.deps.inboxOptions);
    this.wake(actor.jobId);
  }

  /** An owner's cancel: a message from the owner on the actors' channel, ID derived from the call that asked. */
  private async cancelFromOwner(jobId: string, ownerId: string, reason: 'user_cancelled' | 'owner_ended', token: string): Promise<void> {
    const msg: InboxMessage = {
      id: derivedId('message', 'job-cancel', jobId, token), from: ownerId, to: jobId, kind: 'subagent_interrupt', target: 'now', wakeup: true,
      content: reason, request: null, sentAt: new Date(this.deps.clock.nowMs()).toISOString(),
    };
    await this.deps.inbox.publish(msg, 'actor');
    const h = this.hosted.get(jobId);
    if (h) await h.actor.receive(msg, 'actor');
  }

  /** Mail came for a job hosted here: its inbox is read until nothing waits. */
  wake(jobId: string): void {
    this.hosted.get(jobId)?.mailbox.wake();
  }

  /** Stops hosting one job (its lease moved): its process group is stopped, nothing committed. */
  evict(jobId: string): void {
    const h = this.hosted.get(jobId);
    if (!h) return;
    this.hosted.delete(jobId);
    h.mailbox.close();
    void h.actor.stop();
  }

  /** Stops hosting every job: processes stopped within the grace, nothing committed (the next holder ends or restarts them). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.labelTimer) clearTimeout(this.labelTimer);
    const all = [...this.hosted.values()];
    this.hosted.clear();
    this.deps.scheduler.close();
    for (const h of all) h.mailbox.close();
    await Promise.all(all.map((h) => h.actor.stop().catch(() => {})));
  }
}

/** A job the directory names but whose log is not a job's: refused, with what to do. */
export function notAJob(jobId: string): ActorloopError {
  return new ActorloopError('job.not_found', `no job ${jobId}: its log does not start a job`, { hint: 'list the jobs with actorloop jobs' });
}
