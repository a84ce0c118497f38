import type { ActorDirectory, DirectoryEntry } from '../bus/directory.js';
import type { TreeAgent } from '../client/tree.js';
import { turnError } from '../client/run-summary.js';
import type { ActorDetail, ActorSummary, PendingApproval, PendingQuestion } from '../protocol/gateway.js';
import { agentNotFound } from '../protocol/errors.js';
import { pendingApprovals, pendingQuestions, type Projection } from '../store/projection.js';
import { LivenessCheck, type LivenessPorts } from './actor-liveness.js';
import { redactJson, type RedactText } from './redact-json.js';
import type { FoldedTree, TreeFolds } from './tree-folds.js';

// What the gateway's reads answer (`GET /v1/actors`, `GET /v1/actors/:id`, `actors.list`,
// `actor.inspect`; the runs list and what needs a person build on them, `run-reads.ts`): each tree folded from its logs with the client follower and the tree fold
// (kept between reads and moved on, `tree-folds.ts`), so a status is the log's, never the
// directory's cache. Everything is redacted on the way out.

/** The ports the reads use. */
export interface ActorReadPorts {
  /** The gateway's one set of tree folds, shared by every request and connection. */
  folds: TreeFolds;
  directory: Pick<ActorDirectory, 'get' | 'list'>;
  redact: RedactText;
  /** The leases and host records: an actor whose holder died shows `killed` before any commit says so. Absent: the log's word alone. */
  liveness?: LivenessPorts;
}

/** The summary's status: the log's, or `killed` when the check finds its holder gone. */
async function statusWith(check: LivenessCheck | null, summary: ActorSummary, p: Projection | undefined): Promise<ActorSummary> {
  if (check && p && (await check.killed(summary.id, p, summary.status))) summary.status = 'killed';
  return summary;
}

function summaryOf(entry: DirectoryEntry | undefined, a: TreeAgent | undefined, rootId: string, streamSeq: number, actorId: string): ActorSummary {
  return {
    id: actorId,
    parentId: a?.parentId ?? entry?.parentId ?? null,
    rootId,
    name: a?.name ?? entry?.title ?? actorId,
    kind: entry?.kind ?? (a?.job ? 'job' : 'agent'),
    // no log yet: a task handed to hosts and not claimed yet
    status: a?.status ?? 'starting',
    waitingFor: a?.waitingFor ?? null,
    step: a?.step ?? null,
    tool: a?.tool ?? null,
    tokens: a?.tokens ?? 0,
    costUsd: a ? a.costUsd : 0,
    depth: a?.depth ?? 0,
    streamSeq,
  };
}

/** One actor of a tree as a read takes it: its summary, its projection (none: no log yet), and what the read asked of it besides. */
export interface ActorRead<X> {
  summary: ActorSummary;
  p: Projection | undefined;
  extra: X;
}

/** A tree as a read takes it: its actors root first, and the stream sequence of its last commit folded. */
export interface TreeRead<X> {
  rootId: string;
  streamSeq: number;
  actors: Array<ActorRead<X>>;
}

/**
 * The actors of the tree of `root`: those its fold names that the directory or a log knows, then
 * the directory's others (no log yet); each summary's status checked against the leases when
 * `check` is given. `extra` is called while the tree is held (what it returns must be copied out:
 * the next read moves the same projections on).
 */
export async function readTree<X>(
  ports: ActorReadPorts, root: string, entries: readonly DirectoryEntry[], check: LivenessCheck | null,
  extra: (tree: FoldedTree, actorId: string, p: Projection | undefined) => X,
): Promise<TreeRead<X>> {
  const byId = new Map(entries.map((e) => [e.actorId, e]));
  const read = await ports.folds.with(root, (tree) => {
    const actors: Array<ActorRead<X>> = [];
    const seen = new Set<string>();
    const summary = (e: DirectoryEntry | undefined, a: TreeAgent | undefined, actorId: string): ActorSummary => summaryOf(e, a, root, tree.streamSeq, actorId);
    for (const a of tree.fold.view().agents) {
      // the fold names the root even before its log has a line: the directory says whether it exists
      if (!byId.has(a.actorId) && !tree.projections.has(a.actorId)) continue;
      seen.add(a.actorId);
      const p = tree.projections.get(a.actorId);
      actors.push({ summary: summary(byId.get(a.actorId), p ? a : undefined, a.actorId), p, extra: extra(tree, a.actorId, p) });
    }
    for (const e of entries) {
      if (e.rootId === root && !seen.has(e.actorId)) actors.push({ summary: summary(e, undefined, e.actorId), p: undefined, extra: extra(tree, e.actorId, undefined) });
    }
    return { rootId: root, streamSeq: tree.streamSeq, actors };
  });
  // the lease reads of one tree go out together: one after another they were a round trip per running actor.
  // A job's status is its phase: its host's death is its log's to say (`runtime_restarted`), not a lease's
  await Promise.all(read.actors.map(({ summary, p }) => (summary.kind === 'job' ? summary : statusWith(check, summary, p))));
  return read;
}

/** A liveness check for one read, when the gateway reads leases. */
export function livenessCheck(ports: ActorReadPorts): LivenessCheck | null {
  return ports.liveness ? new LivenessCheck(ports.liveness) : null;
}

/**
 * Every actor of the directory, tree by tree, each as its logs say now; with `rootId`, the actors
 * of that tree alone (none when the directory has no actor under it).
 */
export async function listActors(ports: ActorReadPorts, rootId?: string): Promise<ActorSummary[]> {
  const entries = await ports.directory.list();
  const all = new Set(entries.map((e) => e.rootId));
  if (rootId === undefined) ports.folds.keepOnly(all);
  const roots = rootId === undefined ? [...all].sort() : all.has(rootId) ? [rootId] : [];
  const out: ActorSummary[] = [];
  const check = livenessCheck(ports);
  for (const root of roots) out.push(...(await readTree(ports, root, entries, check, () => null)).actors.map((a) => a.summary));
  return redactJson(out, ports.redact);
}

/** One actor's projection summary: open scopes, plan, goal, what it waits on, usage, children, its task, who holds it. */
export async function inspectActor(ports: ActorReadPorts, actorId: string): Promise<ActorDetail> {
  const entry = await ports.directory.get(actorId);
  if (!entry) throw agentNotFound(actorId);
  // built (and copied by the redaction) while the tree is held: the next read moves the same projections on
  const { detail, p } = await ports.folds.with(entry.rootId, (tree) => ({ detail: redactJson(detailOf(tree, entry, actorId), ports.redact), p: tree.projections.get(actorId) }));
  const check = livenessCheck(ports);
  await statusWith(check, detail.actor, p);
  // a host's name, as its lease and host record hold it: nothing of a log in it to redact
  detail.holder = check ? await check.holder(actorId) : null;
  return detail;
}

/** A pending approval as a person must see it: the call's arguments beside what it binds. */
export function approvalOf(p: Projection, a: ReturnType<typeof pendingApprovals>[number]): PendingApproval {
  return {
    approvalId: a.approvalId,
    callId: a.callId,
    tool: a.tool,
    toolVersion: a.toolVersion,
    arguments: p.pending.calls.find((c) => c.callId === a.callId)?.arguments ?? null,
    plan: a.plan ?? null,
    planDigest: a.planDigest,
    preview: a.preview ?? null,
    reason: a.reason ?? null,
    rule: a.rule ?? null,
    expiresAt: new Date(a.expiresAt).toISOString(),
  };
}

/** A pending question as a person must see it. */
export function questionOf(q: ReturnType<typeof pendingQuestions>[number]): PendingQuestion {
  return {
    questionId: q.questionId, question: q.question, options: q.options, allowFreeText: q.allowFreeText, sensitive: q.sensitive,
    expiresAt: new Date(q.expiresAt).toISOString(),
  };
}

function detailOf(tree: FoldedTree, entry: DirectoryEntry, actorId: string): ActorDetail {
  const agent = tree.fold.view().agents.find((a) => a.actorId === actorId);
  const p = tree.projections.get(actorId);
  const facts = tree.facts.get(actorId);
  const summary = summaryOf(entry, p ? agent : undefined, entry.rootId, tree.streamSeq, actorId);
  const calls = p?.pending.calls ?? [];
  const last = p?.lastTurn;
  return {
    actor: summary,
    seq: p?.seq ?? 0,
    epoch: p?.epoch ?? 0,
    turns: p?.turns ?? 0,
    openTurn: p?.openTurn
      ? { id: p.openTurn.id, startedAt: p.openTurn.startedAt, steps: p.openTurn.steps, toolCalls: p.openTurn.toolCalls, interrupted: p.openTurn.interrupted === true }
      : null,
    openStep: p?.openStep ? { id: p.openStep.id, index: p.openStep.index } : null,
    openAttempt: p?.openAttempt ? { id: p.openAttempt.id, index: p.openAttempt.index } : null,
    calls: calls.map((c) => ({
      callId: c.callId, name: c.name, arguments: c.arguments, started: c.started, ended: c.observation !== null, approvalId: c.approvalId ?? null,
    })),
    lastTurn: last
      ? {
        id: last.id, outcome: last.outcome, reason: last.reason, answer: last.answer,
        endedAt: facts?.endedAt ?? null,
        error: turnError({ outcome: last.outcome, reason: last.reason, attemptError: facts?.ended?.attemptError ?? null, limits: facts?.ended?.limits ?? null }),
      }
      : null,
    task: facts?.task ?? null,
    startedAt: entry.createdAt,
    workspace: entry.workspace,
    holder: null,
    plan: p?.plan ?? null,
    goal: p?.goal ?? null,
    pendingApprovals: p ? pendingApprovals(p).map((a) => approvalOf(p, a)) : [],
    pendingQuestions: p ? pendingQuestions(p).map(questionOf) : [],
    usage: { inputTokens: p?.usage.inputTokens ?? 0, outputTokens: p?.usage.outputTokens ?? 0, estimated: p?.usage.estimated ?? false },
    costUsd: summary.costUsd,
    children: agent?.children ?? [],
  };
}

/** The directory entry of an actor, or NotFoundError. */
export async function entryOf(directory: Pick<ActorDirectory, 'get'>, actorId: string): Promise<DirectoryEntry> {
  const entry = await directory.get(actorId);
  if (!entry) throw agentNotFound(actorId);
  return entry;
}
