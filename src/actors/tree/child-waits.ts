import { JobNoticeSchema } from '../../protocol/job-events.js';
import { noticeText, NOTICE_KINDS, SubagentNoticeSchema, SubagentReportSchema } from '../../protocol/subagents.js';
import type { Projection } from '../../store/projection.js';
import { abortReason, type EffectContext } from '../agent/effect-context.js';
import type { RuntimeToolRun } from '../agent/runtime-tool.js';

// Calls that wait for children (a foreground spawn, `wait_agents`; design §6b): the wait is a fact
// in the log (`subagent/waiting`, with an absolute deadline), and the call stays started, with no
// end, until a child's message it waits for arrives — then the message's inclusion
// (`subagent/completed`) and the call's result are one commit — or the deadline passes, or the
// turn stops waiting. Nothing of the wait lives in memory alone: a rerun after a crash finds the
// wait in the log, re-arms its deadline, and takes a message that came meanwhile.

type Ids = { turn: string; step: string; call: string };

/** Ends a runtime tool's call with a result the model reads. */
export function callSucceeded(a: EffectContext, r: Pick<RuntimeToolRun, 'ids' | 'call'>, output: string, source = `tool:${r.call.name}`): void {
  a.stage({ type: 'tool/result', ...r.ids, data: { ok: true, output, error: null, durationMs: 0, artifact: null, source, trust: 'trusted' } });
}

/** Ends a runtime tool's call with an error the model reads (bad input, a limit). */
export function callFailed(a: EffectContext, r: Pick<RuntimeToolRun, 'ids' | 'call'>, code: string, message: string): void {
  a.stage({
    type: 'tool/result', ...r.ids,
    data: { ok: false, output: `Error: ${message}`, error: { code, message, retryable: false }, durationMs: 0, artifact: null, source: `tool:${r.call.name}`, trust: 'trusted' },
  });
}

/** What one pending child message is: its kind and the child it is from. */
type WaitedKind = 'subagent_completed' | 'subagent_report' | 'job_notice';

function messageOf(p: Projection, messageId: string): { kind: WaitedKind; childId: string; outcome: string | null } | null {
  const item = p.inbox[messageId];
  if (!item || item.state !== 'pending' || !(NOTICE_KINDS.has(item.kind) || item.kind === 'job_notice')) return null;
  try {
    const raw: unknown = JSON.parse(item.content);
    // a job's notice: `wait_jobs` waits on job IDs as `wait_agents` waits on children
    if (item.kind === 'job_notice') return { kind: 'job_notice', childId: JobNoticeSchema.parse(raw).jobId, outcome: null };
    if (item.kind === 'subagent_completed') {
      const n = SubagentNoticeSchema.parse(raw);
      return { kind: 'subagent_completed', childId: n.childId, outcome: n.outcome };
    }
    return { kind: 'subagent_report', childId: SubagentReportSchema.parse(raw).childId, outcome: null };
  } catch {
    return null;
  }
}

/**
 * The pending child messages a wait takes, oldest first: `wait_agents` takes every one waiting
 * from its children (a fan-out's notices that came together are one result, not a step each), a
 * foreground spawn its child's notice alone.
 */
function matchesFor(p: Projection, wait: { childIds: string[]; any: boolean }): Array<{ messageId: string; kind: WaitedKind; childId: string; outcome: string | null }> {
  const found = [];
  for (const id of p.nextStep ?? []) {
    const m = messageOf(p, id);
    if (!m || !wait.childIds.includes(m.childId)) continue;
    // a foreground spawn waits for its child's answer; a report goes to the next step as it is
    if (!wait.any && m.kind !== 'subagent_completed') continue;
    found.push({ messageId: id, ...m });
    if (!wait.any) break;
  }
  return found;
}

const timers = new WeakMap<EffectContext, Map<string, NodeJS.Timeout>>();
/** Each open wait's listener on its turn's abort signal, removed when the wait ends (a turn may wait hundreds of times). */
const aborts = new WeakMap<EffectContext, Map<string, () => void>>();

function clearTimer(a: EffectContext, callId: string): void {
  const t = timers.get(a)?.get(callId);
  if (t) clearTimeout(t);
  timers.get(a)?.delete(callId);
  aborts.get(a)?.get(callId)?.();
  aborts.get(a)?.delete(callId);
}

/** The call is still open and waiting (not ended by a message, the deadline or an abort). */
function stillWaiting(a: EffectContext, callId: string): boolean {
  return a.projection.waits?.[callId] !== undefined && a.projection.pending.calls.some((c) => c.callId === callId && c.observation === null);
}

/** Takes a message the wait of `ids.call` waits for, if one is pending: its inclusion and the call's result, staged together. */
function settleOne(a: EffectContext, ids: Ids): boolean {
  const wait = a.projection.waits?.[ids.call];
  if (!wait || !stillWaiting(a, ids.call)) return false;
  const found = matchesFor(a.projection, wait);
  if (found.length === 0) return false;
  const texts = found.map((m) => noticeText(m.kind, a.projection.inbox[m.messageId]!.content));
  for (const m of found) {
    a.stage({ type: 'subagent/completed', ...ids, data: { childId: m.childId, messageId: m.messageId, kind: m.kind, outcome: (m.outcome as 'completed' | null) ?? null } });
  }
  const jobs = found.every((m) => m.kind === 'job_notice');
  const source = found.length === 1 ? `${jobs ? 'job' : 'subagent'}:${found[0]!.childId}` : jobs ? 'jobs' : 'subagents';
  a.stage({ type: 'tool/result', ...ids, data: { ok: true, output: texts.join('\n\n'), error: null, durationMs: 0, artifact: null, source, trust: 'untrusted' } });
  clearTimer(a, ids.call);
  return true;
}

/** Ends a wait whose deadline passed. */
function expire(a: EffectContext, ids: Ids): void {
  const wait = a.projection.waits?.[ids.call];
  clearTimer(a, ids.call);
  if (!wait || !stillWaiting(a, ids.call)) return;
  const jobs = a.projection.jobs ?? {};
  const running = wait.childIds.filter((c) => {
    if (Object.hasOwn(jobs, c)) return !jobs[c]!.notified;
    const st = a.projection.children?.[c]?.state;
    return st === 'requested' || st === 'spawned';
  });
  const still = running.length > 0 ? ` Still running: ${running.join(', ')}; their notices come to you as messages.` : '';
  if (wait.any) {
    const ofJobs = wait.childIds.every((c) => Object.hasOwn(jobs, c));
    const output = ofJobs ? `No job ended before the wait's timeout.${still}` : `No subagent reported or ended before the wait's timeout.${still}`;
    a.stage({ type: 'tool/result', ...ids, data: { ok: true, output, error: null, durationMs: 0, artifact: null, source: ofJobs ? 'tool:wait_jobs' : 'tool:wait_agents', trust: 'trusted' } });
  } else {
    const message = `the subagent did not end its turn before the timeout.${still}`;
    a.stage({ type: 'tool/result', ...ids, data: { ok: false, output: `Error: ${message}`, error: { code: 'subagent.timeout', message, retryable: false }, durationMs: 0, artifact: null, source: 'tool:spawn_agent', trust: 'trusted' } });
  }
}

/**
 * Arms the wait of a started call whose `subagent/waiting` is staged: takes a message already
 * pending, else sets its deadline's timer (absolute: re-armed, not restarted, after a crash) and
 * ends it when the turn stops waiting.
 */
export function armWait(a: EffectContext, ids: Ids): void {
  if (settleOne(a, ids)) return;
  const wait = a.projection.waits?.[ids.call];
  if (!wait) return;
  if (wait.deadlineAt !== null) {
    clearTimer(a, ids.call);
    const t = setTimeout(() => {
      timers.get(a)?.delete(ids.call);
      if (a.halted) return;
      expire(a, ids);
      a.kick();
    }, Math.max(0, wait.deadlineAt - a.ports.clock.nowMs()));
    t.unref?.();
    let m = timers.get(a);
    if (!m) timers.set(a, (m = new Map()));
    m.set(ids.call, t);
  }
  const signal = a.signal;
  const cancel = (): void => {
    clearTimer(a, ids.call);
    if (a.halted || !stillWaiting(a, ids.call)) return;
    // waiting changed nothing in the world: the cancel is confirmed
    a.stage({ type: 'tool/cancelled', ...ids, data: { reason: abortReason(a), started: true, confirmed: true } });
    a.kick();
  };
  if (signal.aborted) return cancel();
  signal.addEventListener('abort', cancel, { once: true });
  let m = aborts.get(a);
  if (!m) aborts.set(a, (m = new Map()));
  m.set(ids.call, () => signal.removeEventListener('abort', cancel));
}

/** A child's message arrived: every open wait it satisfies takes it. Returns whether one did. */
export function settleWaits(a: EffectContext): boolean {
  const turn = a.projection.openTurn?.id;
  const step = a.projection.openStep?.id;
  if (!turn || !step) return false;
  let any = false;
  for (const call of Object.keys(a.projection.waits ?? {})) any = settleOne(a, { turn, step, call }) || any;
  return any;
}
