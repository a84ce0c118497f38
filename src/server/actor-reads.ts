import type { ActorDirectory, DirectoryEntry } from '../bus/directory.js';
import type { TreeAgent } from '../client/tree.js';
import type { ActorDetail, ActorSummary } from '../protocol/gateway.js';
import { agentNotFound } from '../protocol/errors.js';
import { pendingApprovals, pendingQuestions, type Projection } from '../store/projection.js';
import { LivenessCheck, type LivenessPorts } from './actor-liveness.js';
import { redactJson, type RedactText } from './redact-json.js';
import type { FoldedTree, TreeFolds } from './tree-folds.js';

// What the gateway's reads answer (`GET /v1/actors`, `GET /v1/actors/:id`, `actors.list`,
// `actor.inspect`): each tree folded from its logs with the client follower and the tree fold
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
    kind: entry?.kind ?? 'agent',
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

/**
 * Every actor of the directory, tree by tree, each as its logs say now; with `rootId`, the actors
 * of that tree alone (none when the directory has no actor under it).
 */
export async function listActors(ports: ActorReadPorts, rootId?: string): Promise<ActorSummary[]> {
  const entries = await ports.directory.list();
  const byId = new Map(entries.map((e) => [e.actorId, e]));
  const all = new Set(entries.map((e) => e.rootId));
  if (rootId === undefined) ports.folds.keepOnly(all);
  const roots = rootId === undefined ? [...all].sort() : all.has(rootId) ? [rootId] : [];
  const out: ActorSummary[] = [];
  const check = ports.liveness ? new LivenessCheck(ports.liveness) : null;
  for (const root of roots) {
    const summaries = await ports.folds.with(root, (tree) => {
      const trees: Array<{ summary: ActorSummary; p: Projection | undefined }> = [];
      const seen = new Set<string>();
      for (const a of tree.fold.view().agents) {
        // the fold names the root even before its log has a line: the directory says whether it exists
        if (!byId.has(a.actorId) && !tree.projections.has(a.actorId)) continue;
        seen.add(a.actorId);
        const p = tree.projections.get(a.actorId);
        trees.push({ summary: summaryOf(byId.get(a.actorId), p ? a : undefined, root, tree.streamSeq, a.actorId), p });
      }
      for (const e of entries) if (e.rootId === root && !seen.has(e.actorId)) trees.push({ summary: summaryOf(e, undefined, root, tree.streamSeq, e.actorId), p: undefined });
      return trees;
    });
    // the lease reads of one tree go out together: one after another they were a round trip per running actor
    out.push(...(await Promise.all(summaries.map(({ summary, p }) => statusWith(check, summary, p)))));
  }
  return redactJson(out, ports.redact);
}

/** One actor's projection summary: open scopes, plan, goal, what it waits on, usage, children. */
export async function inspectActor(ports: ActorReadPorts, actorId: string): Promise<ActorDetail> {
  const entry = await ports.directory.get(actorId);
  if (!entry) throw agentNotFound(actorId);
  // built while the tree is held: the next read moves the same projections on
  const { detail, p } = await ports.folds.with(entry.rootId, (tree) => ({ detail: detailOf(tree, entry, actorId, ports.redact), p: tree.projections.get(actorId) }));
  await statusWith(ports.liveness ? new LivenessCheck(ports.liveness) : null, detail.actor, p);
  return detail;
}

function detailOf(tree: FoldedTree, entry: DirectoryEntry, actorId: string, redact: RedactText): ActorDetail {
  const agent = tree.fold.view().agents.find((a) => a.actorId === actorId);
  const p = tree.projections.get(actorId);
  const summary = summaryOf(entry, p ? agent : undefined, entry.rootId, tree.streamSeq, actorId);
  const calls = p?.pending.calls ?? [];
  const detail: ActorDetail = {
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
    lastTurn: p?.lastTurn ? { id: p.lastTurn.id, outcome: p.lastTurn.outcome, reason: p.lastTurn.reason, answer: p.lastTurn.answer } : null,
    plan: p?.plan ?? null,
    goal: p?.goal ?? null,
    pendingApprovals: p
      ? pendingApprovals(p).map((a) => ({
        approvalId: a.approvalId,
        callId: a.callId,
        tool: a.tool,
        toolVersion: a.toolVersion,
        arguments: calls.find((c) => c.callId === a.callId)?.arguments ?? null,
        plan: a.plan ?? null,
        planDigest: a.planDigest,
        preview: a.preview ?? null,
        reason: a.reason ?? null,
        rule: a.rule ?? null,
        expiresAt: new Date(a.expiresAt).toISOString(),
      }))
      : [],
    pendingQuestions: p
      ? pendingQuestions(p).map((q) => ({
        questionId: q.questionId, question: q.question, options: q.options, allowFreeText: q.allowFreeText, sensitive: q.sensitive,
        expiresAt: new Date(q.expiresAt).toISOString(),
      }))
      : [],
    usage: { inputTokens: p?.usage.inputTokens ?? 0, outputTokens: p?.usage.outputTokens ?? 0, estimated: p?.usage.estimated ?? false },
    costUsd: summary.costUsd,
    children: agent?.children ?? [],
  };
  return redactJson(detail, redact);
}

/** The directory entry of an actor, or NotFoundError. */
export async function entryOf(directory: Pick<ActorDirectory, 'get'>, actorId: string): Promise<DirectoryEntry> {
  const entry = await directory.get(actorId);
  if (!entry) throw agentNotFound(actorId);
  return entry;
}
