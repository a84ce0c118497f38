import { readFile, realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { sha256Digest } from '../../protocol/canonical-json.js';
import { newId } from '../../protocol/ids.js';
import type { HistoryItem, Usage } from '../../protocol/history.js';
import type { EventData, ModelErrorClass } from '../../protocol/events.js';
import type { CompactionRejection } from '../../protocol/compaction-events.js';
import type { ModelOutput, ModelRequest, PreparedRequest } from '../../model/model-port.js';
import { countTokens } from '../../model/tokens.js';
import { ModelError } from '../../protocol/errors.js';
import { modelName } from '../../model/model-spec.js';
import { applyCheckpoint, compactionRange, enoughGain, missingPins, SUMMARY_HEADING, type CompactionRange, type PinnedFacts } from '../../context/checkpoint.js';
import type { Assembly } from '../../context/assembly.js';
import { compactionState, type CompactionState } from '../../store/compaction-projection.js';
import { abortReason, scope, settings, type EffectContext } from '../agent/effect-context.js';
import { costFor, ensureModel, estimateUsage } from '../agent/model-request.js';
import { reserveAttempt, reservesAttempt, settleAttempt } from '../goals/budget.js';
import { sleep } from '../../protocol/sleep.js';

// Compaction (design §10): when a step's request would not fit its window (or the provider said
// it did not, or a person asked), a range of closed steps is summarized by a model attempt of its
// own and replaced by a checkpoint that keeps, verbatim, what must not be lost. The full log is
// untouched; only the model-visible history changes. Each move is an event, so a kill at any
// instant resumes: `compaction/started` → `attempt/start {kind: compaction}` → `attempt/end` with
// `checkpoint/committed` or `compaction/rejected` in the same commit.

/** Checkpoints one step may commit before it gives up (`context_cannot_fit`: the revision limit). */
export const MAX_REQUEST_REVISIONS = 4;
/** Candidates one step may lose to a changed history in a row before it gives up. */
export const MAX_CONFLICTS = 3;
/** Tokens a checkpoint must save by default (`compaction_min_gain_tokens`). */
export const DEFAULT_MIN_GAIN_TOKENS = 512;
/** The newest closed steps kept verbatim by default (`compaction_keep_steps`). */
export const DEFAULT_KEEP_STEPS = 2;
/** Characters of one message the summary's request holds (its start; the rest is cut with a note). */
const MESSAGE_MAX_CHARS = 2_000;
/** Characters a summary may stream before it is cut (its request asks for at most 2,048 tokens). */
const SUMMARY_MAX_CHARS = 64 * 1024;
/** Files larger than this are named without a digest (reading them is not worth a checkpoint). */
const DIGEST_MAX_BYTES = 16 * 1024 * 1024;

/** The instructions of a compaction's summary attempt: short, fixed, and never the agent's own. */
export const COMPACTION_INSTRUCTIONS = [
  'You summarize part of a coding agent\'s conversation so the agent can go on without it.',
  'Write a concise summary of what was done and learned in the messages below: facts confirmed, decisions made and why,',
  'what was tried and failed, and what is left to do. Keep file paths, identifiers, commands and error messages exact.',
  'Do not invent anything; do not address the user. The task, the user\'s corrections, the files changed and other',
  'required facts are kept beside your summary by the runtime, so you need not repeat them. Plain text, at most 400 words.',
].join(' ');

/**
 * Called by the step's prepare after assembling its request, before anything is staged of it:
 * starts a compaction when the request would not fit (or the provider said the last one did not,
 * or a person asked). Returns true when it staged a start or a rejection that ends the step, so
 * no `request/prepared` follows; false when the request goes out as prepared (a person's ask that
 * found nothing to do is answered with a rejection that does not end the step).
 */
export async function maybeCompact(ctx: EffectContext, assembly: Assembly | null): Promise<boolean> {
  const p = ctx.projection;
  const c = p.compaction;
  const overflow = assembly?.overflow ?? null;
  const refused = c?.overflowed === true;
  const asked = c?.asked ?? null;
  if (overflow === null && !refused && asked === null) return false;
  const state = compactionState(p);
  const mustFit = overflow !== null || refused;
  const trigger: EventData<'compaction/started'>['trigger'] = overflow !== null ? 'budget' : refused ? 'overflow' : 'asked';
  const checkpoint = newId('checkpoint');
  const reject = (reason: CompactionRejection, message: string): boolean => {
    ctx.stage({ type: 'compaction/rejected', ...scope(ctx), data: { checkpoint, reason, message, endsStep: mustFit, ...(asked !== null ? { messageId: asked } : {}) } });
    return mustFit;
  };
  if (mustFit && assembly) {
    const b = assembly.budget;
    const fixed = assembly.contributions.filter((r) => r.source !== 'history' && r.source !== 'checkpoint').reduce((n, r) => n + r.tokens, 0);
    if (b.window !== null && fixed + b.reserve > b.window) {
      return reject('fixed_too_large', `the instructions, docs, tool schemas and this step's messages alone need ${fixed} tokens and ${b.reserve} are kept for the answer, over the ${b.window}-token window: compaction cannot help (raise context_window or cut the docs)`);
    }
  }
  if (mustFit && state.requestRevision >= MAX_REQUEST_REVISIONS) {
    return reject('revision_limit', `this step compacted ${state.requestRevision - 1} times and its request still does not fit (at most ${MAX_REQUEST_REVISIONS - 1} checkpoints a step)`);
  }
  if (mustFit && state.conflicts >= MAX_CONFLICTS) {
    return reject('conflict', `the history changed under ${state.conflicts} compactions in a row`);
  }
  const keep = settings(ctx).context?.compactionKeepSteps ?? DEFAULT_KEEP_STEPS;
  const range = compactionRange(p.history, keep) ?? (mustFit && keep > 1 ? compactionRange(p.history, 1) : null);
  if (range === null) {
    return reject('nothing_to_compact', mustFit
      ? `nothing closed is left to compact: the task and the newest step alone do not fit (${overflow ?? `the provider refused the request${c?.refusal ? `: ${c.refusal}` : ''}`})`
      : 'nothing closed is left to compact: the conversation is the task and its newest steps');
  }
  ctx.stage({
    type: 'compaction/started',
    ...scope(ctx),
    data: {
      checkpoint,
      trigger,
      range,
      historyRevision: state.historyRevision,
      requestRevision: state.requestRevision,
      tokensBefore: assembly?.budget.tokens ?? 0,
      ...(asked !== null ? { messageId: asked } : {}),
    },
  });
  await ctx.flush();
  ctx.ports.faults.hit('after:compaction/started', ctx.actorId);
  return true;
}

/**
 * The `compact` effect of the step's `compacting` state: opens the summary's attempt (its budget
 * reserved in the same commit). On a recovery it waits for the open attempt to be closed first
 * (the attempt machine closes it as interrupted, and the step enters `compacting` again).
 */
export async function startCompactionAttempt(ctx: EffectContext): Promise<void> {
  const open = ctx.projection.compaction?.open ?? null;
  if (open === null || ctx.projection.openAttempt !== null) return;
  const retryAt = ctx.projection.compaction?.retryAt;
  if (retryAt !== undefined) {
    // the failed attempt is committed before the wait, so a crash during it waits again
    await ctx.flush();
    const wait = retryAt - ctx.ports.clock.nowMs();
    if (wait > 0) await (ctx.ports.clock.sleep ? ctx.ports.clock.sleep(wait, ctx.signal) : sleep(wait, ctx.signal)).catch(() => {});
  }
  if (ctx.signal.aborted) {
    ctx.send({ type: 'abort', reason: abortReason(ctx) });
    return;
  }
  const prepared = await compactionRequest(ctx, open.range);
  const attempt = newId('attempt');
  const reserved = reservesAttempt(ctx.projection) ? await reserveAttempt(ctx, attempt, prepared) : { room: null };
  if ('stop' in reserved) {
    ctx.send({ type: 'abort', reason: reserved.stop });
    return;
  }
  ctx.turn.outputRoom = reserved.room ? { attemptId: attempt, ...reserved.room } : null;
  // the request's body is a blob like any prepared request's: what the model was asked stays readable
  const write = ctx.ports.blobs.put(prepared.body, prepared.digest);
  if (ctx.ports.blobs.shared) ctx.holdCommit(write);
  else write.catch((err: unknown) => ctx.logger.warn({ err, digest: prepared.digest }, 'compaction request blob not stored'));
  ctx.stage({ type: 'attempt/start', ...scope(ctx), attempt, data: { index: 1, requestDigest: prepared.digest, kind: 'compaction' } });
}

/**
 * The summary's request: fixed instructions and the range rendered as one message, capped so it
 * cannot need a compaction itself (half the window, four characters a token). Deterministic for
 * the same history, so a recovery rebuilds the same bytes.
 */
async function compactionRequest(ctx: EffectContext, range: CompactionRange): Promise<PreparedRequest> {
  const model = await ensureModel(ctx);
  const s = settings(ctx);
  const name = modelName(s.model);
  const window = s.context?.window ?? model.capabilities(name).contextWindow ?? 128_000;
  const history = await ctx.outputs.history(ctx.projection.history);
  const maxChars = Math.max(4_000, Math.floor(window / 2) * 4);
  const request: ModelRequest = {
    model: name,
    instructions: COMPACTION_INSTRUCTIONS,
    tools: [],
    messages: [{ role: 'user', content: renderRange(history.slice(range.from, range.to), range, maxChars) }],
    maxOutputTokens: Math.min(2_048, Math.max(256, Math.floor(window / 8))),
    purpose: { kind: 'compaction', index: compactionState(ctx.projection).summaries },
  };
  return model.prepare(request);
}

/** The range as the summary's model reads it: one line a message (`[role …] text`), capped. */
export function renderRange(items: readonly HistoryItem[], range: CompactionRange, maxChars: number): string {
  const cut = (t: string): string => (t.length > MESSAGE_MAX_CHARS ? `${t.slice(0, MESSAGE_MAX_CHARS)} …(${t.length - MESSAGE_MAX_CHARS} more characters)` : t);
  const one = (t: string): string => cut(t.replace(/\s+/g, ' ').trim());
  const lines = [`Messages ${range.from}-${range.to - 1} of the conversation, oldest first:`];
  let used = lines[0]!.length;
  for (const item of items) {
    let line: string;
    if (item.role === 'assistant') {
      const calls = item.toolCalls.map((t) => `${t.name}(${cut(t.arguments)})`).join('; ');
      line = `[assistant] ${one(item.content ?? '')}${calls ? ` calls: ${calls}` : ''}`;
    } else if (item.role === 'tool') line = `[tool ${item.name} ${item.callId}] ${one(item.content)}`;
    else line = `[${item.role}] ${one(item.content)}`;
    if (used + line.length + 1 > maxChars) {
      lines.push(`[…] ${items.length - (lines.length - 1)} more messages not shown (the summary's request is capped at ${maxChars} characters)`);
      break;
    }
    lines.push(line);
    used += line.length + 1;
  }
  return lines.join('\n');
}

/**
 * The `callModel` of a compaction attempt: streams the summary, then decides in the commit of its
 * `attempt/end`: the checkpoint, if the history it replaces is unchanged (CAS on the history
 * revision), it holds every required item, its summary is new and it saves enough tokens;
 * otherwise a rejection saying which.
 */
export async function runCompactionAttempt(ctx: EffectContext, attemptId: string, digest: string): Promise<void> {
  await ctx.flush();
  const c = compactionState(ctx.projection);
  const open = c.open;
  const ids = Object.assign(scope(ctx), { attempt: attemptId });
  const model = await ensureModel(ctx);
  const started = ctx.ports.clock.nowMs();
  const prepared = open ? await compactionRequest(ctx, open.range) : null;
  if (prepared && prepared.digest !== digest) ctx.logger.warn({ expected: digest, got: prepared.digest }, 're-prepared compaction request differs from the recorded one');
  const attempt = new AbortController();
  const forward = (): void => attempt.abort(ctx.signal.reason);
  ctx.signal.addEventListener('abort', forward, { once: true });
  let output: ModelOutput | null = null;
  let streamed = 0;
  let failure: { class: ModelErrorClass; message: string; retryable: boolean } | null = null;
  let retryAfter: number | null = null;
  try {
    if (!prepared) throw new Error('no compaction is open for this attempt');
    if (ctx.signal.aborted) throw new Error('aborted before the request was sent');
    for await (const ev of model.stream(prepared, attempt.signal)) {
      if (ev.type === 'done') {
        output = ev.output;
        break;
      }
      streamed += ev.type === 'text_delta' ? ev.text.length : ev.argumentsDelta.length;
      // a summary is asked for in at most a few thousand tokens: an endless one is stopped, never held whole
      if (streamed > SUMMARY_MAX_CHARS) {
        const tooLarge = new ModelError('output_too_large', `the summary ran past ${SUMMARY_MAX_CHARS} characters and was cut`, { retryable: false });
        attempt.abort(tooLarge);
        throw tooLarge;
      }
    }
    if (!output) throw new Error('model stream ended without a final output');
  } catch (err) {
    if ((err as { code?: string }).code === 'actor.dropped') throw err;
    // our own cut is no adapter's error to classify
    const info = err instanceof ModelError && err.code === 'output_too_large' ? { class: 'output_too_large' as const, message: err.message, retryable: false, retryAfterMs: null } : model.classifyError(err);
    failure = { class: info.class, message: info.message, retryable: info.retryable };
    retryAfter = info.retryAfterMs;
  } finally {
    ctx.signal.removeEventListener('abort', forward);
  }
  const latencyMs = Math.round(ctx.ports.clock.nowMs() - started);
  const bytes = prepared ? Buffer.byteLength(prepared.body) : 0;
  if (ctx.signal.aborted) {
    const usage = estimateUsage(bytes, streamed);
    ctx.stage({ type: 'attempt/end', ...ids, data: { outcome: 'aborted', error: { class: 'cancelled', message: abortReason(ctx), retryable: false }, usage, backoffMs: null, latencyMs, costUsd: costFor(ctx, usage) } });
    settleAttempt(ctx, attemptId, usage);
    return;
  }
  if (failure || !output || !open) {
    const usage: Usage = streamed > 0 ? estimateUsage(bytes, streamed) : { inputTokens: 0, outputTokens: 0, estimated: false };
    const error = failure ?? { class: 'server' as const, message: 'no compaction is open', retryable: false };
    // a retryable failure with attempts left is asked again after its backoff, as the step's own attempts are
    const tries = c.attempts ?? 1;
    const retry = open !== null && error.retryable && tries < settings(ctx).maxAttempts;
    const backoffMs = retry ? (retryAfter ?? Math.round(Math.min(8000, 250 * 2 ** (tries - 1)) * (0.5 + Math.random() / 2))) : null;
    ctx.stage({ type: 'attempt/end', ...ids, data: { outcome: 'failed', error, usage, backoffMs, latencyMs, costUsd: costFor(ctx, usage) } });
    settleAttempt(ctx, attemptId, usage);
    if (open && !retry) {
      ctx.stage({
        type: 'compaction/rejected',
        ...scope(ctx),
        data: { checkpoint: open.checkpoint, reason: 'attempt_failed', message: `the summary's model attempt failed: ${error.class}: ${error.message}`, endsStep: open.trigger !== 'asked' },
      });
    }
    return;
  }
  // the summary is back; nothing of its outcome is committed yet
  ctx.ports.faults.hit('before:checkpoint/committed', ctx.actorId);
  const decision = await decide(ctx, c, open, output.content ?? '');
  ctx.stage({ type: 'attempt/end', ...ids, data: { outcome: 'succeeded', error: null, usage: output.usage, backoffMs: null, latencyMs, costUsd: costFor(ctx, output.usage) } });
  settleAttempt(ctx, attemptId, output.usage);
  if ('reason' in decision) {
    const endsStep = decision.reason !== 'conflict' && open.trigger !== 'asked';
    ctx.stage({ type: 'compaction/rejected', ...scope(ctx), data: { checkpoint: open.checkpoint, reason: decision.reason, message: decision.message, endsStep } });
    return;
  }
  ctx.stage({ type: 'checkpoint/committed', ...scope(ctx), data: decision });
}

type Decision = EventData<'checkpoint/committed'> | { reason: CompactionRejection; message: string };

async function decide(ctx: EffectContext, c: CompactionState, open: NonNullable<CompactionState['open']>, summary: string): Promise<Decision> {
  // CAS: the candidate replaces the history it was made from, or nothing
  if (c.historyRevision !== open.historyRevision) {
    return { reason: 'conflict', message: `the history changed while the summary was made (revision ${open.historyRevision} → ${c.historyRevision}): a new range is taken` };
  }
  const p = ctx.projection;
  const { files, pins } = await pinnedFacts(ctx);
  const candidate = applyCheckpoint(p.history, open.range, summary, pins);
  const missing = missingPins(candidate.text, pins);
  if (missing.length > 0) return { reason: 'missing_pins', message: `the checkpoint lost required items: ${missing.join(', ')}` };
  const replaced = p.history.slice(open.range.from, open.range.to);
  // a range that starts with a checkpoint, summarized as that checkpoint was: no progress
  const head = replaced[0];
  const before = head && head.role === 'user' && c.checkpoints.some((k) => k.at === open.range.from) ? summaryOf(head.content) : null;
  if (before !== null && before === summaryOf(candidate.text)) {
    return { reason: 'unchanged', message: 'the summary is the one of the checkpoint already there: compacting again makes no progress' };
  }
  const name = modelName(settings(ctx).model);
  const full = await ctx.outputs.history(replaced);
  const tokensBefore = full.reduce((n, h) => n + countTokens(itemText(h), name).tokens, 0);
  const tokensAfter = countTokens(candidate.text, name).tokens;
  const minGain = settings(ctx).context?.compactionMinGainTokens ?? DEFAULT_MIN_GAIN_TOKENS;
  if (!enoughGain(tokensBefore, tokensAfter, minGain)) {
    return { reason: 'no_gain', message: `no progress: the checkpoint saves ${tokensBefore - tokensAfter} tokens of ${tokensBefore}, fewer than compaction_min_gain_tokens (${minGain})` };
  }
  return { id: open.checkpoint, range: open.range, historyRevision: open.historyRevision, text: candidate.text, digest: candidate.digest, tokensBefore, tokensAfter, kept: candidate.kept, files };
}

/** The model's summary in a checkpoint's text (what follows its summary heading). */
function summaryOf(text: string): string | null {
  const at = text.indexOf(SUMMARY_HEADING);
  return at < 0 ? null : text.slice(at + SUMMARY_HEADING.length).trim();
}

function itemText(h: HistoryItem): string {
  return h.role === 'assistant' ? `${h.content ?? ''}${h.toolCalls.map((t) => `${t.name}${t.arguments}`).join('')}` : h.content;
}

/** What the checkpoint must keep, from the projection and (for the files' digests) the workspace. */
export async function pinnedFacts(ctx: EffectContext): Promise<{ pins: PinnedFacts; files: Array<{ path: string; digest: string | null }> }> {
  const p = ctx.projection;
  const c = compactionState(p);
  const s = settings(ctx);
  const files: Array<{ path: string; digest: string | null }> = [];
  for (const path of c.files) files.push({ path, digest: await fileDigest(s.workspace, path) });
  // steers and injects waiting for the next step are the user's words too
  const waiting = (p.nextStep ?? []).map((id) => p.inbox[id]?.content ?? '').filter((t) => t !== '');
  const pins: PinnedFacts = {
    task: c.task ?? '',
    goal: p.goal ? { objective: p.goal.objective, phase: p.goal.phase, revision: p.goal.revision } : null,
    corrections: [...c.corrections, ...waiting],
    filesChanged: files,
    verifications: Object.entries(c.verifications).map(([command, ok]) => ({ command, ok })),
    plan: p.plan ? p.plan.items.map((i) => `[${i.status}] ${i.content}`).join('; ') : null,
    openApprovals: Object.entries(p.approvals ?? {}).filter(([, a]) => a.state === 'pending').map(([id, a]) => `${id} (${a.tool} ${a.callId})`),
    openQuestions: Object.entries(p.questions ?? {}).filter(([, q]) => q.state === 'pending').map(([id, q]) => `${id}: ${q.question}`),
    outcomeUnknown: c.unknown,
    running: Object.entries(p.children ?? {}).filter(([, ch]) => ch.state === 'spawned' || ch.state === 'requested').map(([id, ch]) => ({ id, name: ch.name })),
    permissions: { approvalMode: s.approvalMode ?? 'default', readOnly: s.readOnly === true, tools: s.tools },
    latestError: c.latestError ?? null,
  };
  return { pins, files };
}

/**
 * The sha256 of a workspace file as it is now; null when it is gone, too large, not a plain file,
 * or (through a link anywhere on its path) outside the workspace: the host reads nothing an agent
 * pointed it at beyond the workspace.
 */
async function fileDigest(workspace: string, path: string): Promise<string | null> {
  try {
    const root = await realpath(workspace);
    const real = await realpath(isAbsolute(path) ? path : resolve(workspace, path));
    const rel = relative(root, real);
    if (rel.startsWith('..') || isAbsolute(rel)) return null;
    const st = await stat(real);
    if (!st.isFile() || st.size > DIGEST_MAX_BYTES) return null;
    return sha256Digest(await readFile(real));
  } catch {
    return null;
  }
}
