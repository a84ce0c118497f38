import type { DirectoryEntry } from '../bus/directory.js';
import { taskLine } from '../client/run-summary.js';
import { isBusy, runStatus } from '../client/status.js';
import { ConfigError } from '../protocol/errors.js';
import { RUNS_PAGE, type PendingItem, type RunsQuery, type RunsResponse, type RunSummary } from '../protocol/gateway.js';
import { addCost } from '../protocol/history.js';
import { pendingApprovals, pendingQuestions, type Projection } from '../store/projection.js';
import { approvalOf, entryOf, livenessCheck, questionOf, readTree, type ActorReadPorts, type TreeRead } from './actor-reads.js';
import { redactJson } from './redact-json.js';
import type { FoldedTree } from './tree-folds.js';

// The operator's reads (`GET /v1/runs`, `GET /v1/pending`, `runs.list`, `pending.list`): the runs
// (roots and their trees) newest first, and every approval and question a person is asked. Built on
// the same tree folds, liveness check and redaction as the actor reads, so a run's status and an
// actor's never disagree.

/** Trees a read folds at once: each is a reader on the bus, and a list of thousands must not open thousands. */
const TREES_AT_ONCE = 8;

/** `f` over `items`, at most `TREES_AT_ONCE` at a time, the results in the items' order. */
async function mapFew<T, R>(items: readonly T[], f: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await f(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(TREES_AT_ONCE, items.length) }, worker));
  return out;
}

/** A pending item with when it was asked, to put the oldest first. */
interface Asked {
  item: PendingItem;
  at: string;
  streamSeq: number;
}

/** What a run needs of one actor of its tree, copied out while the tree is held. */
interface RunFacts {
  pending: Asked[];
  firstTask: string | null;
  endedAt: string | null;
  /** The root's: whether it waits on children, without the attempt's word (`runStatus` reads it). */
  waits: Pick<Projection, 'waits' | 'openAttempt'> | null;
  /** The root's last turn's outcome and reason. */
  lastTurn: { outcome: string; reason: string | null } | null;
}

/** Every approval and question pending for a person in one actor's log, with when each was asked. */
function pendingOf(tree: FoldedTree, actorId: string, p: Projection | undefined): Asked[] {
  const approvals = p ? pendingApprovals(p) : [];
  const questions = p ? pendingQuestions(p) : [];
  if (!p || (approvals.length === 0 && questions.length === 0)) return [];
  const facts = tree.facts.get(actorId);
  // the tree's view is built only for an actor someone is asked about
  const name = tree.fold.view().agents.find((a) => a.actorId === actorId)?.name ?? actorId;
  const who = { actorId, actorName: name, rootId: tree.fold.rootId };
  // a record without its asking event folded (none should be): last, in expiry order
  const when = (id: string, fallbackMs: number) => facts?.asked.get(id) ?? { at: new Date(fallbackMs).toISOString(), streamSeq: Number.MAX_SAFE_INTEGER };
  return [
    ...approvals.map((a) => ({ item: { ...who, kind: 'approval' as const, approval: approvalOf(p, a) }, ...when(a.approvalId, a.expiresAt) })),
    ...questions.map((q) => ({ item: { ...who, kind: 'question' as const, question: questionOf(q) }, ...when(q.questionId, q.askedAt ?? q.expiresAt) })),
  ];
}

/** Oldest asked first; one commit's in the order its events came. */
function byAsked(a: Asked, b: Asked): number {
  return a.at.localeCompare(b.at) || a.streamSeq - b.streamSeq;
}

/** The roots of the directory, newest first by creation, then by ID (the order a cursor holds its place in). */
function rootsNewestFirst(entries: readonly DirectoryEntry[]): DirectoryEntry[] {
  return entries.filter((e) => e.parentId === null).sort((a, b) => b.createdAt.localeCompare(a.createdAt) || (a.actorId < b.actorId ? 1 : a.actorId > b.actorId ? -1 : 0));
}

/** The cursor of a run's place in the list: opaque to clients, `createdAt|id` inside. */
export function runsCursor(run: Pick<DirectoryEntry, 'createdAt' | 'actorId'>): string {
  return Buffer.from(`${run.createdAt}|${run.actorId}`, 'utf8').toString('base64url');
}

/** The place a cursor names, or ConfigError naming `before` when it is not one this gateway gives. */
function placeOf(cursor: string): { createdAt: string; actorId: string } {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const bar = text.lastIndexOf('|');
  const createdAt = text.slice(0, bar);
  const actorId = text.slice(bar + 1);
  if (bar <= 0 || Number.isNaN(Date.parse(createdAt)) || !/^agt_[0-9A-Z]{26}$/.test(actorId)) {
    throw new ConfigError('gateway.bad_cursor', `before: ${JSON.stringify(cursor)} is not a cursor of the runs list`, {
      hint: 'give `before` the `next` of the page before, as it was given (or leave it out for the first page)',
    });
  }
  return { createdAt, actorId };
}

/** True when `e` comes after the place `at` in the list (older, or as old with a lower ID). */
function after(e: DirectoryEntry, at: { createdAt: string; actorId: string }): boolean {
  return e.createdAt < at.createdAt || (e.createdAt === at.createdAt && e.actorId < at.actorId);
}

/** The run of a tree read: its root's summary with the tree's sums, what it waits on, its task and times. */
function runOf(entry: DirectoryEntry, tree: TreeRead<RunFacts>): RunSummary {
  const root = tree.actors.find((a) => a.summary.id === entry.actorId)!;
  const others = tree.actors.filter((a) => a !== root);
  const status = root.extra.waits
    ? runStatus(root.summary.status, root.extra.waits, others.map((a) => a.summary.status))
    : root.summary.status;
  const pending = tree.actors.flatMap((a) => a.extra.pending).sort(byAsked);
  let tokens = 0;
  let costUsd: number | null = 0;
  let endedAt: string | null = null;
  for (const a of tree.actors) {
    tokens += a.summary.tokens;
    costUsd = addCost(costUsd, a.summary.costUsd);
    if (a.extra.endedAt !== null && (endedAt === null || a.extra.endedAt > endedAt)) endedAt = a.extra.endedAt;
  }
  // a run ends when nothing more happens in it unasked: every actor of the tree is past busy
  if (tree.actors.some((a) => isBusy(a.summary.status))) endedAt = null;
  const durationMs = endedAt === null ? null : Math.max(0, Date.parse(endedAt) - Date.parse(entry.createdAt));
  const task = root.extra.firstTask ?? entry.title;
  return {
    id: entry.actorId,
    name: root.summary.name,
    task: task === '' ? null : taskLine(task),
    status,
    // why it ended, once its status is its root's last turn's outcome and that was not `completed`
    reason: root.extra.lastTurn && root.extra.lastTurn.outcome === status && status !== 'completed' ? root.extra.lastTurn.reason : null,
    waitingOn: pending.map(({ item }) => ({ actorId: item.actorId, name: item.actorName, kind: item.kind, id: item.kind === 'approval' ? item.approval.approvalId : item.question.questionId })),
    startedAt: entry.createdAt,
    endedAt,
    durationMs: Number.isNaN(durationMs) ? null : durationMs,
    tokens,
    costUsd,
    // a job is no child: its owner's run lists it (`GET /v1/jobs`), as `actorloop runs` counts it
    children: others.filter((a) => a.summary.kind !== 'job').length,
    workspace: entry.workspace,
    streamSeq: tree.streamSeq,
  };
}

/** Whether a run passes the filter: a status asked for (`waiting` also: a person is asked something in it), and the text in its ID, name or task. */
function kept(run: RunSummary, q: RunsQuery): boolean {
  if (q.status && !q.status.includes(run.status) && !(q.status.includes('waiting') && run.waitingOn.length > 0)) return false;
  if (q.q !== undefined && q.q.trim() !== '') {
    const text = q.q.trim().toLowerCase();
    if (![run.id, run.name, run.task ?? ''].some((s) => s.toLowerCase().includes(text))) return false;
  }
  return true;
}

/**
 * One page of the runs (roots), newest first, as their trees' logs say now (`GET /v1/runs`). A
 * filter folds every tree to judge it (each fold is kept, so that costs the commits since the last
 * read); without one only the page's trees are read.
 */
export async function listRuns(ports: ActorReadPorts, q: RunsQuery = {}): Promise<RunsResponse> {
  const limit = q.limit ?? RUNS_PAGE.defaultLimit;
  const entries = await ports.directory.list();
  ports.folds.keepOnly(new Set(entries.map((e) => e.rootId)));
  const place = q.before !== undefined ? placeOf(q.before) : null;
  const roots = rootsNewestFirst(entries);
  const check = livenessCheck(ports);
  // redacted before the filter reads it: a text filter must not find what the answer never shows
  const read = async (entry: DirectoryEntry): Promise<RunSummary> => redactJson(runOf(entry, await readTree(ports, entry.actorId, entries, check, (tree, actorId, p): RunFacts => {
    const facts = tree.facts.get(actorId);
    return {
      // copied (by the redaction) while the tree is held
      pending: redactJson(pendingOf(tree, actorId, p), ports.redact),
      firstTask: facts?.firstTask ?? null,
      endedAt: facts?.endedAt ?? null,
      waits: actorId === entry.actorId && p ? { waits: { ...p.waits }, openAttempt: p.openAttempt } : null,
      lastTurn: actorId === entry.actorId && p?.lastTurn ? { outcome: p.lastTurn.outcome, reason: p.lastTurn.reason } : null,
    };
  })), ports.redact);
  const filtered = q.status !== undefined || (q.q !== undefined && q.q.trim() !== '');
  let page: Array<{ entry: DirectoryEntry; run: RunSummary }>;
  let total: number;
  let more: boolean;
  if (filtered) {
    const all = (await mapFew(roots, async (entry) => ({ entry, run: await read(entry) }))).filter((r) => kept(r.run, q));
    total = all.length;
    const rest = place ? all.filter((r) => after(r.entry, place)) : all;
    page = rest.slice(0, limit);
    more = rest.length > limit;
  } else {
    total = roots.length;
    const rest = place ? roots.filter((e) => after(e, place)) : roots;
    page = await mapFew(rest.slice(0, limit), async (entry) => ({ entry, run: await read(entry) }));
    more = rest.length > limit;
  }
  const last = page[page.length - 1];
  return { runs: page.map((r) => r.run), next: more && last ? runsCursor(last.entry) : null, total };
}

/**
 * Every approval and question pending for a person (`GET /v1/pending`), oldest asked first: in
 * every tree, or with `agentId` in that agent's tree (NotFoundError when the directory has no such agent).
 */
export async function listPending(ports: ActorReadPorts, agentId?: string): Promise<{ items: PendingItem[] }> {
  const entries = await ports.directory.list();
  let roots: string[];
  if (agentId !== undefined) roots = [(await entryOf(ports.directory, agentId)).rootId];
  else {
    const all = new Set(entries.map((e) => e.rootId));
    ports.folds.keepOnly(all);
    roots = [...all].sort();
  }
  // what is pending is the log's word alone: no lease needs reading. Each actor's items are copied
  // (by the redaction) while its tree is held
  const trees = await mapFew(roots, (root) => readTree(ports, root, entries, null, (tree, actorId, p) => redactJson(pendingOf(tree, actorId, p), ports.redact)));
  return { items: trees.flatMap((t) => t.actors.flatMap((a) => a.extra)).sort(byAsked).map((a) => a.item) };
}
