import { describe, expect, it } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { formatViolations, verifyLog, VIOLATION_CODES, type Violation } from '../../src/verify/verify.js';
import { indexOf, LogBuilder, mutate, type RawEvent } from '../actors/log-builder.js';
import { completedJob, JobLogBuilder } from '../helpers/job-log.js';

/**
 * One turn as the runtime writes it: step 1 reads a file (no effects), step 2 answers.
 * Seqs: 1 inbox/received, 2 turn/start, 3 user/message, 4 step/start, 5 request/prepared,
 * 6 attempt/start, 7 attempt/end, 8 assistant/accepted, 9 tool/call, 10 policy/decided,
 * 11 tool/start, 12 tool/result, 13 step/end, 14 step/start, 15 request/prepared,
 * 16 attempt/start, 17 attempt/end, 18 assistant/accepted, 19 step/end, 20 turn/end.
 */
function toolTurn(b = new LogBuilder()): LogBuilder {
  b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt().acceptCall('read_file').call();
  const call = b.lastCall;
  b.startTool(call).result(call).endStep('tool_calls', 1);
  return b.startStep(2).answer('notes.txt lists three tasks.').endStep('final').endTurn();
}
const clean = (): ActorEvent[] => toolTurn().events;

/**
 * Two crashes, each recovered: one mid-attempt (interrupted, a new attempt follows), one after
 * an effectful, manual call started (outcome unknown, the turn goes on).
 * Seqs: 6 attempt/start, 7 actor/rehydrated, 8 recovery/started, 9 attempt/end interrupted,
 * 10 recovery/continuation, 11-12 attempt 2, 13 accepted, 14 tool/call, 15 policy, 16 tool/start,
 * 17 actor/rehydrated, 18 recovery/started, 19 tool/outcome_unknown, 20 recovery/continuation,
 * 21 step/end, 22-27 step 2, 28 turn/end.
 */
function recovered(): ActorEvent[] {
  const b = new LogBuilder();
  b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt();
  b.crash().endAttempt('interrupted').continuation(`attempt ${b.attempt} interrupted`);
  b.startAttempt(2).endAttempt().acceptCall('write_file').call({ name: 'write_file', effects: 'possible', recovery: 'manual' });
  const call = b.lastCall;
  b.startTool(call, { name: 'write_file', effects: 'possible' });
  b.crash().outcomeUnknown(call).continuation(`call ${call} outcome unknown`);
  b.endStep('tool_calls', 1).startStep(2).answer('The write may not have happened; please check.').endStep('final');
  return b.endTurn().events;
}

/**
 * A crash after `tool/start`, and recovery running the call again with the same key.
 * Seqs 1-10 as `toolTurn`; 11 tool/start, 12 actor/rehydrated, 13 recovery/started,
 * 14 tool/start (rerun), 15 recovery/continuation, 16 tool/result, 17 step/end, 18-23 step 2, 24 turn/end.
 */
function rerun(effects: 'none' | 'possible', recovery: 'rerun' | 'idempotent'): ActorEvent[] {
  const name = effects === 'none' ? 'read_file' : 'write_file';
  const b = new LogBuilder();
  b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt().acceptCall(name).call({ name, effects, recovery });
  const call = b.lastCall;
  b.startTool(call, { name, effects }).crash().startTool(call, { name, effects, rerun: true }).continuation(`call ${call} run again`);
  b.result(call).endStep('tool_calls', 1).startStep(2).answer('Done.').endStep('final');
  return b.endTurn().events;
}

/**
 * A crash after a write_file (reconcile recovery) started, noted as a kill, and the verdict of
 * its tool. Seqs 1-10 as `toolTurn` (write_file); 11 tool/start, 12 actor/killed, 13
 * actor/rehydrated, 14 recovery/started, 15 tool/reconciled, then by verdict — applied: 16
 * tool/result, 17 continuation; not_applied: 16 tool/start (rerun), 17 continuation, 18
 * tool/result; unknown: 16 tool/outcome_unknown, 17 continuation. Then step 2 and turn/end.
 */
function reconciled(verdict: 'applied' | 'not_applied' | 'unknown'): ActorEvent[] {
  const name = 'write_file';
  const b = new LogBuilder();
  b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt().acceptCall(name).call({ name, effects: 'possible', recovery: 'reconcile' });
  const call = b.lastCall;
  b.startTool(call, { name, effects: 'possible' }).crash({ killed: 'after:tool/start' }).reconciled(call, verdict);
  if (verdict === 'applied') b.result(call).continuation(`call ${call} reconciled: applied`);
  if (verdict === 'not_applied') b.startTool(call, { name, effects: 'possible', rerun: true }).continuation(`call ${call} run again`).result(call);
  if (verdict === 'unknown') b.outcomeUnknown(call).continuation(`call ${call} outcome unknown`);
  b.endStep('tool_calls', 1).startStep(2).answer('Done.').endStep('final');
  return b.endTurn().events;
}

/**
 * One step under a token budget of 1000: the attempt reserves 300 and is charged 120.
 * Seqs: 1 inbox/received, 2 turn/start (maxTokens 1000), 3 user/message, 4 step/start,
 * 5 request/prepared, 6 attempt/start, 7 budget/reserved, 8 attempt/end, 9 budget/settled,
 * 10 assistant/accepted, 11 step/end, 12 turn/end.
 */
function budgeted(): ActorEvent[] {
  const b = new LogBuilder();
  b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().reserve(300).endAttempt().settle(120);
  b.push('assistant/accepted', { content: 'Done.', toolCalls: [], finishReason: 'stop' }, { turn: b.turn, step: b.step, attempt: b.attempt });
  b.endStep('final').endTurn();
  return mutate(b.events, (r) => {
    const start = r[indexOf(r, 'turn/start')]!.data as { settings: { budgets: Record<string, unknown> } };
    start.settings.budgets.maxTokens = 1000;
  });
}

/**
 * A turn interrupted while a call ran: seqs 1-10 as `toolTurn` (the tool named `name`), 11
 * tool/start, 12 tool/cancelled with `facts`, 13 step/end cancelled, 14 turn/end cancelled.
 * Without `started`, the call is cancelled before it started: no tool/start, and 11 is the cancel.
 */
function interrupted(effects: 'none' | 'possible', facts: { started?: boolean; confirmed?: boolean }): ActorEvent[] {
  const name = effects === 'none' ? 'read_file' : 'shell';
  const b = new LogBuilder();
  b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt().acceptCall(name).call({ name, effects, recovery: effects === 'none' ? 'rerun' : 'manual' });
  const call = b.lastCall;
  if (facts.started !== false) b.startTool(call, { name, effects });
  b.cancelled(call, facts).endStep('cancelled');
  return b.endTurn('cancelled', null).events;
}

/** A host drained mid-attempt (`actor/released`), and the next incarnation carried on: no kill noted. */
function drained(): ActorEvent[] {
  const b = new LogBuilder();
  b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().released();
  b.crash().endAttempt('interrupted').continuation(`attempt ${b.attempt} interrupted`);
  b.startAttempt(2).endAttempt();
  b.push('assistant/accepted', { content: 'Done.', toolCalls: [], finishReason: 'stop' }, { turn: b.turn, step: b.step, attempt: b.attempt });
  return b.endStep('final').endTurn().events;
}

/**
 * `clean`, but the policy asked: seqs 10 policy/decided ask, 11 approval/requested, 12
 * approval/granted (a client), 13 policy/decided allow (the recheck), 14 tool/start, … 23 turn/end.
 */
function approved(): ActorEvent[] {
  return mutate(clean(), (r) => {
    const i = indexOf(r, 'policy/decided');
    const allow = r[i]!;
    const ask = { ...allow, data: { decision: 'ask', rule: 'default:write', reason: null } };
    const request = { ...allow, type: 'approval/requested', data: { approvalId: 'apr_1', tool: 'read_file', toolVersion: '1', planDigest: 'sha256:p', expiresAt: 1 } };
    const grant = { ...allow, type: 'approval/granted', data: { approvalId: 'apr_1', by: 'client:cli' } };
    r.splice(i, 1, ask, request, grant, { ...allow, data: { ...allow.data, recheck: true } });
  });
}

/** `approved`, answered by a message from the inbox as the runtime records it: received, then consumed by the grant. */
function approvedByMessage(): ActorEvent[] {
  return mutate(approved(), (r) => {
    const i = indexOf(r, 'approval/granted');
    const received = { ...structuredClone(r[0]!), data: { ...structuredClone(r[0]!.data), messageId: 'msg_answer', kind: 'approval_response' } };
    r[i]!.data.messageId = 'msg_answer';
    r.splice(i, 0, received);
  });
}

const CHECKPOINT_TEXT = ["Checkpoint: items 1-2 of this conversation were compacted into this summary.", '', "Task (the user's words): Summarise notes.txt", 'Changed: notes.md (sha256:n)', 'Permissions: mode auto-edit; tools read_file', '', 'Summary of the compacted steps:', 'read notes.txt'].join('\n');

/**
 * `toolTurn` whose second step compacts its first before its request: compaction/started (seq
 * 13, from history revision 2: the task and the closed step), the summary's attempt (14, 15),
 * checkpoint/committed (16), then the step's request as before.
 */
function compacted(): ActorEvent[] {
  return mutate(clean(), (r) => {
    const at = indexOf(r, 'step/start', 2);
    const step = r[at]!;
    const scope = { turn: step.turn, step: step.step };
    const base = { ...structuredClone(step), ...scope };
    const started = { ...base, type: 'compaction/started', data: { checkpoint: 'ckpt_1', trigger: 'budget', range: { from: 1, to: 3 }, historyRevision: 2, requestRevision: 1, tokensBefore: 9000 } };
    const start = { ...base, attempt: 'att_c', type: 'attempt/start', data: { index: 1, requestDigest: 'sha256:c', kind: 'compaction' } };
    const end = { ...base, attempt: 'att_c', type: 'attempt/end', data: { outcome: 'succeeded', error: null, usage: { inputTokens: 10, outputTokens: 5, estimated: false }, backoffMs: null, latencyMs: 3 } };
    const committed = {
      ...base, type: 'checkpoint/committed',
      data: { id: 'ckpt_1', range: { from: 1, to: 3 }, historyRevision: 2, text: CHECKPOINT_TEXT, digest: 'sha256:t', tokensBefore: 5000, tokensAfter: 100, kept: ['task', 'file notes.md', 'permissions'], files: [{ path: 'notes.md', digest: 'sha256:n' }] },
    };
    r.splice(at + 1, 0, started, start, end, committed);
  });
}

/** `toolTurn`, then a second turn that answers at once. Seqs 21 inbox/received, 22 turn/start, … */
function twoTurns(): ActorEvent[] {
  const b = toolTurn();
  return b.receive('msg_2', 'Thanks').startTurn('msg_2').startStep(1).answer('You are welcome.').endStep('final').endTurn().events;
}

/** A call with invalid arguments: answered by a failed tool/result directly, never started. */
function invalidCall(): ActorEvent[] {
  const b = new LogBuilder();
  b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt().acceptCall('read_file');
  b.call({ status: 'invalid_arguments' }).result(b.lastCall, false).endStep('tool_calls', 1);
  return b.startStep(2).answer('I could not read it.').endStep('final').endTurn().events;
}

/** The `i`-th raw event, cloned, with changes: how a test writes a stray event. */
function like(r: RawEvent[], i: number, over: Partial<RawEvent>, data: Record<string, unknown> = {}): RawEvent {
  const e = structuredClone(r[i]!);
  return { ...e, ...over, data: { ...e.data, ...data } };
}

const pairs = (v: Violation[]) => v.map((x) => [x.code, x.seq]);

describe('verifyLog on logs the runtime writes', () => {
  it('holds for a job that ran, completed and notified its owner, and for one restarted, reconciled or cancelled', () => {
    expect(verifyLog(completedJob(), { complete: true })).toEqual([]);
    const restarted = new JobLogBuilder().created({ idempotent: true, retries: 1 }).started().phase('running', 'pending', 'runtime_restarted');
    restarted.started(2).phase('running', 'completed', 'exited', 2).notified();
    expect(verifyLog(restarted.events, { complete: true })).toEqual([]);
    const reconciled = new JobLogBuilder().created({ effects: 'possible' }).started().phase('running', 'reconciling', 'outcome_unknown');
    reconciled.phase('reconciling', 'interrupted', 'outcome_unknown').notified('interrupted');
    expect(verifyLog(reconciled.events, { complete: true })).toEqual([]);
    const cancelled = new JobLogBuilder().created();
    cancelled.push('job/cancel_requested', { reason: 'user_cancelled', by: 'client:cli', messageId: null });
    cancelled.phase('pending', 'cancelled', 'user_cancelled', 0).notified('cancelled');
    expect(verifyLog(cancelled.events, { complete: true })).toEqual([]);
  });

  it('holds for a step that compacted its closed steps before its request', () => {
    expect(verifyLog(compacted(), { complete: true })).toEqual([]);
  });

  it('holds for a turn that parked for its approval before the grant', () => {
    const log = mutate(approved(), (r) => r.splice(indexOf(r, 'approval/granted'), 0, parked(r, indexOf(r, 'approval/requested'))));
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('lays the fixture out as the comments say', () => {
    expect(clean().map((e) => e.type)).toEqual([
      'inbox/received', 'turn/start', 'user/message', 'step/start', 'request/prepared', 'attempt/start', 'attempt/end',
      'assistant/accepted', 'tool/call', 'policy/decided', 'tool/start', 'tool/result', 'step/end', 'step/start',
      'request/prepared', 'attempt/start', 'attempt/end', 'assistant/accepted', 'step/end', 'turn/end',
    ]);
    expect(recovered().map((e) => `${e.seq} ${e.type}`)).toContain('19 tool/outcome_unknown');
    expect(rerun('none', 'rerun').map((e) => `${e.seq} ${e.type}`)).toContain('14 tool/start');
    expect(questioned().slice(10, 15).map((e) => `${e.seq} ${e.type}`)).toEqual(['11 tool/start', '12 ask/asked', '13 inbox/received', '14 ask/answered', '15 tool/result']);
  });

  it('passes a question asked once and answered once, with the parked fact between', () => {
    const log = mutate(questioned(), (r) => {
      const p = parked(r, indexOf(r, 'ask/asked'));
      p.data = { waitingFor: 'question', ids: ['q_1'], commands: ['actorloop answer agt_1 q_1 "<text>"'] };
      r.splice(indexOf(r, 'ask/asked') + 1, 0, p);
    });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it.each([
    ['a 2-step turn with a tool call', clean],
    ['a recovered log: interrupted attempt, outcome_unknown', recovered],
    ['a rerun of a call without effects', () => rerun('none', 'rerun')],
    ['a rerun of an idempotent effectful call with the same key', () => rerun('possible', 'idempotent')],
    ['two turns', twoTurns],
    ['an invalid call answered without a start', invalidCall],
    ['a call approved by a person and allowed on the recheck', approved],
    ['a call approved by an answer from the inbox', approvedByMessage],
    ['a reconciled call found applied: its result follows', () => reconciled('applied')],
    ['a reconciled call found not applied: it runs again with its key', () => reconciled('not_applied')],
    ['a reconciled call whose outcome its tool could not tell', () => reconciled('unknown')],
    ['a drained host (actor/released) and the incarnation after it', drained],
    ['an effectful call cancelled after its executor confirmed it stopped', () => interrupted('possible', { started: true, confirmed: true })],
    ['an effectful call cancelled before it started', () => interrupted('possible', { started: false, confirmed: true })],
    ['a call without effects cancelled unconfirmed: nothing can be unknown', () => interrupted('none', { started: true, confirmed: false })],
    ['an effectful call cancelled in a log older than the confirmation fields', () => interrupted('possible', {})],
    ['an attempt under a token budget, reserved and settled once', budgeted],
  ])('finds nothing wrong in %s, complete or not', (_, log) => {
    expect(verifyLog(log())).toEqual([]);
    expect(verifyLog(log(), { complete: true })).toEqual([]);
  });

  it('finds nothing wrong in an empty log', () => {
    expect(verifyLog([], { complete: true })).toEqual([]);
  });

  it('accepts a log cut mid-attempt or mid-call while more may follow', () => {
    expect(verifyLog(clean().slice(0, 6))).toEqual([]);
    expect(verifyLog(clean().slice(0, 11))).toEqual([]);
    expect(verifyLog(recovered().slice(0, 8))).toEqual([]);
  });
});

/** One broken log: `log` is a clean fixture changed as little as the violation needs. */
interface Case {
  name: string;
  code: string;
  seq: number;
  log: () => ActorEvent[];
  complete?: boolean;
}

const cases: Case[] = [
  // a job's log (seqs: 1 job/created, 2 job/started, 3 pending → running, 4 running → completed, 5 job/notified)
  { name: 'job events in a log that never created a job', code: 'job.uncreated', seq: 1, log: () => mutate(completedJob(), (r) => r.splice(0, 1)) },
  {
    name: 'a job moves along no edge of its machine (pending → reconciling)', code: 'job.edge', seq: 3,
    log: () => mutate(completedJob(), (r) => { r[2]!.data.phase = 'reconciling'; r[3]!.data.from = 'reconciling'; }),
  },
  { name: 'a job ends without its end', code: 'job.end_missing', seq: 4, log: () => mutate(completedJob(), (r) => { r[3]!.data.end = null; }) },
  {
    name: 'a job ends twice', code: 'job.ended_twice', seq: 5,
    log: () => mutate(completedJob(), (r) => r.splice(4, 0, like(r, 3, {}, { from: 'completed', phase: 'failed', reason: 'executor_error' }))),
  },
  { name: 'a finished job log that never ends its job', code: 'job.unended', seq: 1, complete: true, log: () => completedJob().slice(0, 3) },
  { name: 'a second execution starts while the first runs', code: 'job.started_twice', seq: 4, log: () => mutate(completedJob(), (r) => r.splice(3, 0, like(r, 1, {}, { attempt: 2 }))) },
  { name: 'an execution starts after the job ended', code: 'job.started_after_end', seq: 5, log: () => mutate(completedJob(), (r) => r.splice(4, 0, like(r, 1, {}, { attempt: 2 }))) },
  { name: "a job's notice is recorded before it ended", code: 'job.notified_early', seq: 4, log: () => mutate(completedJob(), (r) => r.splice(3, 0, r.splice(4, 1)[0]!)) },
  { name: "a job's notice is recorded twice", code: 'job.notified_twice', seq: 6, log: () => mutate(completedJob(), (r) => r.push(like(r, 4, {}))) },
  { name: 'a checkpoint of a compaction never started', code: 'compaction.unstarted', seq: 17, log: () => mutate(compacted(), (r) => r.splice(indexOf(r, 'compaction/started'), 1)) },
  {
    name: 'a compaction committed twice', code: 'compaction.closed_twice', seq: 19,
    log: () => mutate(compacted(), (r) => r.splice(indexOf(r, 'checkpoint/committed') + 1, 0, { ...structuredClone(r[indexOf(r, 'checkpoint/committed')]!), type: 'compaction/rejected', data: { checkpoint: 'ckpt_1', reason: 'no_gain', message: 'x', endsStep: true } })),
  },
  {
    name: 'a compaction starts while another is open', code: 'compaction.nested', seq: 16,
    log: () => mutate(compacted(), (r) => {
      const i = indexOf(r, 'compaction/started');
      r.splice(i + 1, 0, like(r, i, {}, { checkpoint: 'ckpt_2' }), { ...structuredClone(r[i]!), type: 'compaction/rejected', data: { checkpoint: 'ckpt_2', reason: 'conflict', message: 'x', endsStep: false } });
    }),
  },
  { name: 'a checkpoint replaces another range than its compaction was started for', code: 'compaction.mismatch', seq: 18, log: () => mutate(compacted(), (r) => { r[indexOf(r, 'checkpoint/committed')]!.data.range = { from: 1, to: 2 }; }) },
  {
    name: 'a checkpoint committed after the history changed under it (the CAS)', code: 'compaction.cas', seq: 19,
    log: () => mutate(compacted(), (r) => r.splice(indexOf(r, 'checkpoint/committed'), 0, { ...structuredClone(r[0]!), data: { ...structuredClone(r[0]!.data), messageId: 'msg_steer', kind: 'steer' } })),
  },
  { name: 'a checkpoint that does not keep a changed file', code: 'compaction.missing_pins', seq: 18, log: () => mutate(compacted(), (r) => { r[indexOf(r, 'checkpoint/committed')]!.data.kept = ['task', 'permissions']; }) },
  { name: 'a step ends with its compaction open', code: 'compaction.open_at_step_end', seq: 20, log: () => mutate(compacted(), (r) => r.splice(indexOf(r, 'attempt/start', 2), 3)) },
  { name: 'an event is missing', code: 'seq.gap', seq: 11, log: () => mutate(clean(), (r) => r.splice(indexOf(r, 'policy/decided'), 1), false) },
  {
    name: 'a call starts though the policy asked and nobody approved', code: 'call.start_without_allow', seq: 11,
    log: () => mutate(clean(), (r) => { r[indexOf(r, 'policy/decided')]!.data.decision = 'ask'; }),
  },
  {
    name: 'an approval is requested twice', code: 'approval.duplicate', seq: 12,
    log: () => mutate(approved(), (r) => r.splice(indexOf(r, 'approval/requested') + 1, 0, structuredClone(r[indexOf(r, 'approval/requested')]!))),
  },
  {
    name: 'an approval that was never requested is granted', code: 'approval.unknown', seq: 11,
    log: () => mutate(approved(), (r) => r.splice(indexOf(r, 'approval/requested'), 1)),
  },
  {
    name: "a call's approval is granted for another call", code: 'approval.other_call', seq: 12,
    log: () => mutate(approved(), (r) => { r[indexOf(r, 'approval/granted')]!.call = 'call_other'; }),
  },
  {
    name: 'an approval is answered twice', code: 'approval.answered_twice', seq: 13,
    log: () => mutate(approved(), (r) => r.splice(indexOf(r, 'approval/granted') + 1, 0, structuredClone(r[indexOf(r, 'approval/granted')]!))),
  },
  { name: 'an event is repeated', code: 'seq.gap', seq: 10, log: () => mutate(clean(), (r) => r.splice(10, 0, structuredClone(r[9]!)), false) },
  {
    name: 'a recovery is stamped with an older epoch than the rehydration before it', code: 'epoch.backwards', seq: 18,
    log: () => mutate(recovered(), (r) => { r[indexOf(r, 'recovery/started', 2)]!.epoch = 2; }),
  },
  // Its epoch also goes back, but the report names the turn that two incarnations wrote into.
  { name: "a turn's last event comes from an older incarnation", code: 'turn.epochs_interleaved', seq: 28, log: () => mutate(recovered(), (r) => { r[27]!.epoch = 1; }) },
  { name: 'an event of another actor', code: 'event.actor', seq: 5, log: () => mutate(clean(), (r) => { r[4]!.actor = 'agt_other'; }) },
  { name: 'user/message names a turn that is not open', code: 'scope.turn', seq: 3, log: () => mutate(clean(), (r) => { r[2]!.turn = 'turn_9'; }) },
  { name: 'request/prepared names a step that is not open', code: 'scope.step', seq: 5, log: () => mutate(clean(), (r) => { r[4]!.step = 'step_9'; }) },
  { name: 'an answer from an attempt that did not succeed', code: 'scope.attempt', seq: 8, log: () => mutate(clean(), (r) => { r[7]!.attempt = 'att_9'; }) },
  { name: 'policy/decided without a call ID', code: 'scope.call', seq: 10, log: () => mutate(clean(), (r) => { delete r[9]!.call; }) },
  {
    name: 'a turn starts inside a turn', code: 'turn.nested', seq: 4,
    log: () => mutate(clean(), (r) => r.splice(3, 0, like(r, 1, { turn: 'turn_9' }, { messageIds: [] }))),
  },
  { name: 'a turn ends twice', code: 'turn.end_without_start', seq: 21, log: () => mutate(clean(), (r) => r.push(structuredClone(r[19]!))) },
  { name: 'a turn completes over an empty answer', code: 'turn.completed_without_answer', seq: 20, log: () => mutate(clean(), (r) => { r[17]!.data.content = ''; }) },
  { name: 'a turn completes after a stopped step', code: 'turn.completed_without_answer', seq: 20, log: () => mutate(clean(), (r) => { r[18]!.data.outcome = 'stopped'; }) },
  {
    // An answer in an earlier step does not count once a later step asked for tools.
    name: 'a turn completes when its last step asked for tools', code: 'turn.completed_without_answer', seq: 20,
    log: () => {
      const b = new LogBuilder().receive('msg_1').startTurn('msg_1').startStep(1).answer('Early.').endStep('final');
      b.startStep(2).startAttempt().endAttempt().acceptCall('read_file').call();
      return b.startTool(b.lastCall).result(b.lastCall).endStep('tool_calls', 1).endTurn().events;
    },
  },
  { name: 'a step after the turn ended', code: 'step.outside_turn', seq: 21, log: () => mutate(clean(), (r) => r.push(like(r, 3, { step: 'step_9' }))) },
  {
    name: 'a step starts inside a step', code: 'step.nested', seq: 5,
    log: () => mutate(clean(), (r) => r.splice(4, 0, like(r, 3, { step: 'step_9' }), like(r, 12, { step: 'step_9' }))),
  },
  { name: 'a step ends twice', code: 'step.end_without_start', seq: 14, log: () => mutate(clean(), (r) => r.splice(13, 0, structuredClone(r[12]!))) },
  { name: 'a turn ends with a step open', code: 'step.open_at_turn_end', seq: 21, log: () => mutate(clean(), (r) => r.splice(19, 0, like(r, 13, { step: 'step_9' }))) },
  { name: 'an attempt between steps', code: 'attempt.outside_step', seq: 14, log: () => mutate(clean(), (r) => r.splice(13, 0, like(r, 5, { attempt: 'att_9' }))) },
  {
    name: 'an attempt starts inside an attempt', code: 'attempt.nested', seq: 7,
    log: () => mutate(clean(), (r) => r.splice(6, 0, like(r, 5, { attempt: 'att_9' }), like(r, 6, { attempt: 'att_9' }, { outcome: 'failed' }))),
  },
  { name: 'an attempt that never started ends', code: 'attempt.end_without_start', seq: 8, log: () => mutate(clean(), (r) => r.splice(7, 0, like(r, 6, { attempt: 'att_9' }))) },
  { name: 'an attempt ends twice', code: 'attempt.ended_twice', seq: 8, log: () => mutate(clean(), (r) => r.splice(7, 0, structuredClone(r[6]!))) },
  { name: 'a step ends with an attempt open', code: 'attempt.unsettled', seq: 9, log: () => mutate(clean(), (r) => r.splice(8, 0, like(r, 5, { attempt: 'att_9' }))) },
  { name: 'a complete log ends mid-attempt', code: 'attempt.unsettled', seq: 6, complete: true, log: () => clean().slice(0, 6) },
  { name: 'a call is recorded twice', code: 'call.duplicate', seq: 10, log: () => mutate(clean(), (r) => r.splice(9, 0, structuredClone(r[8]!))) },
  { name: 'an invalid call starts', code: 'call.start_without_intent', seq: 11, log: () => mutate(clean(), (r) => { r[8]!.data.status = 'invalid_arguments'; }) },
  { name: 'a start of a call never made', code: 'call.start_without_intent', seq: 12, log: () => mutate(clean(), (r) => r.splice(11, 0, like(r, 10, { call: 'call_9' }))) },
  { name: 'a call starts after its result', code: 'call.start_after_end', seq: 13, log: () => mutate(clean(), (r) => r.splice(12, 0, like(r, 10, {}, { rerun: true }))) },
  {
    name: 'an effectful rerun with another key', code: 'call.effect_twice', seq: 14,
    log: () => mutate(rerun('possible', 'idempotent'), (r) => { r[13]!.data.idempotencyKey = 'idem_other'; }),
  },
  {
    name: 'an effectful second start not marked rerun', code: 'call.effect_twice', seq: 14,
    log: () => mutate(rerun('possible', 'idempotent'), (r) => { r[13]!.data.rerun = false; }),
  },
  {
    name: 'an effectful rerun of a manual call', code: 'call.effect_twice', seq: 14,
    log: () => mutate(rerun('possible', 'idempotent'), (r) => { r[8]!.data.recovery = 'manual'; }),
  },
  {
    name: 'a rerun whose start says it has effects', code: 'call.effect_twice', seq: 14,
    log: () => mutate(rerun('none', 'rerun'), (r) => { r[13]!.data.effects = 'possible'; }),
  },
  { name: 'a result of a valid call never started', code: 'call.result_without_start', seq: 11, log: () => mutate(clean(), (r) => r.splice(10, 1)) },
  {
    name: 'an end of a call never made', code: 'call.end_without_intent', seq: 13,
    log: () => mutate(clean(), (r) => r.splice(12, 0, { ...like(r, 11, { call: 'call_9' }), type: 'tool/cancelled', data: { reason: 'aborted' } })),
  },
  {
    name: 'a started call ends as denied', code: 'call.denied_after_start', seq: 12,
    log: () => mutate(clean(), (r) => { r[11] = { ...r[11]!, type: 'tool/denied', data: { reason: 'denied by policy' } }; }),
  },
  {
    name: 'a started effectful call is cancelled though its executor never confirmed it stopped', code: 'call.cancelled_unconfirmed', seq: 12,
    log: () => interrupted('possible', { started: true, confirmed: false }),
  },
  {
    name: 'a started effectful call is cancelled as if it never started', code: 'call.cancelled_unconfirmed', seq: 12,
    log: () => mutate(interrupted('possible', { started: true, confirmed: true }), (r) => { r[indexOf(r, 'tool/cancelled')]!.data.started = false; }),
  },
  { name: 'a call ends twice', code: 'call.ended_twice', seq: 13, log: () => mutate(clean(), (r) => r.splice(12, 0, structuredClone(r[11]!))) },
  { name: 'a turn ends with a call unended', code: 'call.unended', seq: 9, log: () => mutate(clean(), (r) => r.splice(11, 1)) },
  { name: 'a complete log ends mid-call', code: 'call.unended', seq: 9, complete: true, log: () => clean().slice(0, 11) },
  { name: 'a message is received twice', code: 'inbox.received_twice', seq: 2, log: () => mutate(clean(), (r) => r.splice(1, 0, structuredClone(r[0]!))) },
  { name: 'a turn claims a message never received', code: 'inbox.claim_unreceived', seq: 1, log: () => mutate(clean(), (r) => r.splice(0, 1)) },
  { name: 'two turns claim one message', code: 'inbox.included_twice', seq: 22, log: () => mutate(twoTurns(), (r) => { r[21]!.data.messageIds = ['msg_1']; }) },
  {
    name: 'a message claimed by the turn also answers an approval', code: 'inbox.included_twice', seq: 12,
    log: () => mutate(approved(), (r) => { r[indexOf(r, 'approval/granted')]!.data.messageId = 'msg_1'; }),
  },
  {
    name: 'an approval is answered by a message never received', code: 'inbox.claim_unreceived', seq: 12,
    log: () => mutate(approved(), (r) => { r[indexOf(r, 'approval/granted')]!.data.messageId = 'msg_9'; }),
  },
  { name: 'a message enters the history twice', code: 'inbox.included_twice', seq: 4, log: () => mutate(clean(), (r) => r.splice(3, 0, structuredClone(r[2]!))) },
  {
    name: 'a request includes a message no turn or step reserved', code: 'inbox.included_unreserved', seq: 5,
    log: () => mutate(clean(), (r) => { r[1]!.data.messageIds = []; r[4]!.data.messageIds = ['msg_1']; }),
  },
  {
    name: 'recovery gives back a message its turn claimed', code: 'inbox.requeue_invalid', seq: 8,
    log: () => mutate(recovered(), (r) => { r[indexOf(r, 'recovery/started')]!.data.requeued = ['msg_1']; }),
  },
  {
    name: 'a complete log ends with a steer a step reserved and never included', code: 'inbox.lost', seq: 15, complete: true,
    log: () => mutate(clean(), (r) => {
      r.splice(1, 0, received(r, 'msg_2', 'steer'));
      r[indexOf(r, 'step/start', 2)]!.data.messageIds = ['msg_2'];
      r.splice(indexOf(r, 'step/end', 2));
    }),
  },
  {
    name: 'a model attempt starts after the interrupt', code: 'interrupt.dispatch_after', seq: 18,
    log: () => mutate(clean(), (r) => {
      const i = indexOf(r, 'attempt/start', 2);
      r.splice(i, 0, received(r, 'msg_i', 'interrupt'), interrupt(r, i - 1, 'msg_i'));
      r[indexOf(r, 'turn/end')]!.data.outcome = 'cancelled';
    }),
  },
  {
    name: 'an interrupted turn ends completed', code: 'interrupt.turn_completed', seq: 22,
    log: () => mutate(clean(), (r) => {
      const i = indexOf(r, 'turn/end');
      r.splice(i, 0, received(r, 'msg_i', 'interrupt'), interrupt(r, i, 'msg_i'));
    }),
  },
  {
    name: 'a complete log ends with an interrupted turn open', code: 'interrupt.unended', seq: 21, complete: true,
    log: () => mutate(clean(), (r) => {
      const i = indexOf(r, 'turn/end');
      r.splice(i, 1, received(r, 'msg_i', 'interrupt'), interrupt(r, i - 1, 'msg_i'));
    }),
  },
  {
    name: 'a call is reconciled though its recovery is manual', code: 'call.reconcile_without_start', seq: 15,
    log: () => mutate(reconciled('applied'), (r) => { r[indexOf(r, 'tool/call')]!.data.recovery = 'manual'; }),
  },
  {
    name: 'a call is reconciled after its result', code: 'call.reconcile_without_start', seq: 17,
    log: () => mutate(reconciled('applied'), (r) => r.splice(indexOf(r, 'tool/result') + 1, 0, structuredClone(r[indexOf(r, 'tool/reconciled')]!))),
  },
  {
    name: 'a call is reconciled twice for one start', code: 'call.reconciled_twice', seq: 16,
    log: () => mutate(reconciled('unknown'), (r) => r.splice(indexOf(r, 'tool/reconciled') + 1, 0, structuredClone(r[indexOf(r, 'tool/reconciled')]!))),
  },
  {
    name: 'a reconciled call runs again though its tool found it applied', code: 'call.effect_twice', seq: 16,
    log: () => mutate(reconciled('not_applied'), (r) => { r[indexOf(r, 'tool/reconciled')]!.data = { ...r[indexOf(r, 'tool/reconciled')]!.data, verdict: 'applied', output: 'x' }; }),
  },
  {
    name: 'a result after reconcile found the call not applied, with no start since', code: 'call.result_without_start', seq: 17,
    log: () => mutate(reconciled('not_applied'), (r) => r.splice(indexOf(r, 'tool/start', 2), 1)),
  },
  {
    name: 'actor/killed names an incarnation newer than its writer', code: 'recovery.killed_inconsistent', seq: 12,
    log: () => mutate(reconciled('applied'), (r) => { r[indexOf(r, 'actor/killed')]!.data.epoch = 5; }),
  },
  {
    name: 'a recovery starts before the last one continued', code: 'recovery.unclosed', seq: 8,
    log: () => mutate(recovered(), (r) => r.splice(indexOf(r, 'recovery/continuation'), 1)),
  },
  {
    name: 'a complete log ends mid-recovery', code: 'recovery.unclosed', seq: 18, complete: true,
    log: () => mutate(recovered(), (r) => r.splice(indexOf(r, 'recovery/continuation', 2), 1)),
  },
  {
    name: 'a continuation with no recovery', code: 'recovery.continuation_without_start', seq: 9,
    log: () => mutate(recovered(), (r) => r.splice(indexOf(r, 'recovery/started'), 1)),
  },
  {
    name: 'a parked fact after the turn ended', code: 'parked.outside_turn', seq: 24,
    log: () => mutate(approved(), (r) => r.push(parked(r, r.length - 1))),
  },
  {
    name: 'a parked fact for an approval already granted', code: 'parked.not_pending', seq: 13,
    log: () => mutate(approved(), (r) => r.splice(indexOf(r, 'approval/granted') + 1, 0, parked(r, indexOf(r, 'approval/granted')))),
  },
  {
    name: 'a question is asked twice', code: 'question.duplicate', seq: 13,
    log: () => mutate(questioned(), (r) => r.splice(indexOf(r, 'ask/asked') + 1, 0, structuredClone(r[indexOf(r, 'ask/asked')]!))),
  },
  {
    name: 'an answer to a question never asked', code: 'question.unknown', seq: 13,
    log: () => mutate(questioned(), (r) => r.splice(indexOf(r, 'ask/asked'), 1)),
  },
  {
    name: 'a question answered in another call than the one that asked it', code: 'question.other_call', seq: 14,
    log: () => mutate(questioned(), (r) => { r[indexOf(r, 'ask/answered')]!.call = 'call_0'; }),
  },
  {
    name: 'a question answered twice', code: 'question.answered_twice', seq: 15,
    log: () => mutate(questioned(), (r) => {
      const again = structuredClone(r[indexOf(r, 'ask/answered')]!);
      again.data = { ...again.data, messageId: null, outcome: 'expired', by: 'expiry' };
      r.splice(indexOf(r, 'ask/answered') + 1, 0, again);
    }),
  },
  {
    name: 'a reservation made twice', code: 'budget.reserved_twice', seq: 8,
    log: () => mutate(budgeted(), (r) => { r.splice(indexOf(r, 'budget/reserved') + 1, 0, structuredClone(r[indexOf(r, 'budget/reserved')]!)); }),
  },
  {
    name: 'a reservation settled twice', code: 'budget.settled_twice', seq: 10,
    log: () => mutate(budgeted(), (r) => { r.splice(indexOf(r, 'budget/settled') + 1, 0, structuredClone(r[indexOf(r, 'budget/settled')]!)); }),
  },
  {
    name: 'a settlement of a reservation never made', code: 'budget.settle_unknown', seq: 10,
    log: () => mutate(budgeted(), (r) => {
      const other = structuredClone(r[indexOf(r, 'budget/settled')]!);
      (other.data as { reservationId: string }).reservationId = 'rsv_other';
      r.splice(indexOf(r, 'budget/settled') + 1, 0, other);
    }),
  },
  {
    name: 'a reservation still open when its turn ends', code: 'budget.unsettled', seq: 7,
    log: () => mutate(budgeted(), (r) => { r.splice(indexOf(r, 'budget/settled'), 1); }),
  },
  {
    name: 'a reservation whose worst case does not fit the budget', code: 'budget.over_limit', seq: 7,
    log: () => mutate(budgeted(), (r) => { (r[indexOf(r, 'budget/reserved')]!.data as { tokens: number }).tokens = 1200; }),
  },
  {
    name: 'a goal reservation whose worst case, with what the goal\'s earlier turns were charged, does not fit its budget', code: 'budget.over_limit', seq: 17,
    log: () => mutate(goalBudgeted(), (r) => { (r[goalReservation(r, 1)]!.data as { tokens: number }).tokens = 400; }),
  },
  {
    name: 'a goal reservation settled twice', code: 'budget.settled_twice', seq: 20,
    log: () => mutate(goalBudgeted(), (r) => { const i = indexOf(r, 'budget/settled', 2); r.splice(i + 1, 0, structuredClone(r[i]!)); }),
  },
  {
    name: 'a goal reservation still open when its turn ends', code: 'budget.unsettled', seq: 17,
    log: () => mutate(goalBudgeted(), (r) => { r.splice(indexOf(r, 'budget/settled', 2), 1); }),
  },
  {
    name: 'a reservation against a goal never created', code: 'budget.unknown_goal', seq: 7,
    log: () => mutate(goalBudgeted(), (r) => { (r[goalReservation(r, 0)]!.data as { goalId: string }).goalId = 'goal_2'; }),
  },
  {
    name: 'a turn completes under `cited` with an answer citing a file it never read', code: 'completion.unmet', seq: 20,
    log: () => cited('See [other.txt] for the tasks.'),
  },
  {
    name: 'a turn refuses more answers than its limit', code: 'completion.over_limit', seq: 20,
    log: () => mutate(cited('[notes.txt] lists three tasks.', 1), (r) => {
      const i = indexOf(r, 'assistant/accepted', 2);
      const refusal = { ...structuredClone(r[i]!), attempt: undefined, type: 'completion/rejected', data: { policy: 'cited', missing: ['a citation'], goalRevision: null } };
      r.splice(i + 1, 0, refusal, structuredClone(refusal));
    }),
  },
  {
    name: 'under on_completion_exhausted = "block" the refusal at the limit ends the turn without blocking the goal', code: 'completion.not_blocked', seq: 21,
    log: () => mutate(cited('[notes.txt] lists three tasks.', 1), (r) => {
      (r[indexOf(r, 'turn/start')]!.data.settings as Record<string, unknown>).onCompletionExhausted = 'block';
      const i = indexOf(r, 'assistant/accepted', 2);
      const refusal = { ...structuredClone(r[i]!), attempt: undefined, type: 'completion/rejected', data: { policy: 'cited', missing: ['a citation'], goalRevision: 0, goalActive: true } };
      r.splice(i + 1, 0, refusal);
      const end = r[indexOf(r, 'turn/end')]!;
      end.data = { ...end.data, outcome: 'stopped', reason: 'completion_exhausted', answer: null };
    }),
  },
  {
    name: 'a goal update of a goal never created', code: 'goal.unknown', seq: 23,
    log: () => mutate(goalLog(), (r) => { const u = r[indexOf(r, 'goal/updated', 2)]!; u.data = { ...u.data, goalId: 'goal_2' }; }),
  },
  {
    name: 'a goal update that skips a revision', code: 'goal.revision', seq: 23,
    log: () => mutate(goalLog(), (r) => { const u = r[indexOf(r, 'goal/updated', 2)]!; u.data = { ...u.data, revision: 3, expected: 2 }; }),
  },
  {
    name: 'a goal update whose usage is not what its attempts spent', code: 'goal.usage', seq: 18,
    log: () => mutate(goalLog(), (r) => { const u = r[indexOf(r, 'goal/updated')]!; u.data = { ...u.data, usage: { tokens: 1, seconds: 1, costUsd: null } }; }),
  },
  {
    name: 'a goal updated after it completed', code: 'goal.updated_after_end', seq: 24,
    log: () => mutate(goalLog(), (r) => {
      const again = structuredClone(r[indexOf(r, 'goal/updated', 2)]!);
      again.data = { ...again.data, revision: 3, expected: 2, phase: 'active', by: 'person' };
      r.splice(indexOf(r, 'goal/updated', 2) + 1, 0, again);
    }),
  },
  {
    name: 'a continuation turn no turn end owed', code: 'goal.continuation_unowed', seq: 13,
    log: () => mutate(goalLog(), (r) => { const end = r[indexOf(r, 'turn/end')]!; end.data = { ...end.data, goalContinues: undefined }; }),
  },
  {
    name: 'a continuation owed and never started', code: 'goal.continuation_lost', seq: 24, complete: true,
    log: () => mutate(goalLog(), (r) => { const end = r[indexOf(r, 'turn/end', 2)]!; end.data = { ...end.data, goalContinues: true }; }),
  },
];

/**
 * A goal over two turns: created with the first (one attempt), a continuation turn that asks to
 * complete it, completed at its end. Seqs: 3 goal/created, 12 turn/end (goalContinues), 13 turn/start
 * (goal_continuation), 18 goal/updated r1 (requested), 23 goal/updated r2 complete, 24 turn/end.
 */
function goalLog(): ActorEvent[] {
  const b = new LogBuilder();
  b.receive('msg_1').push('turn/start', { source: 'user_message', messageIds: ['msg_1'], settings: goalSettings() }, { turn: 'turn_1' });
  b.push('goal/created', { goalId: 'goal_1', objective: 'notes', budget: {}, maxIdleTurns: 2 }, { turn: 'turn_1' });
  b.turn = 'turn_1';
  b.startStep(1).startAttempt().endAttempt().answer('one').endStep('final');
  b.push('turn/end', { outcome: 'completed', reason: null, answer: 'one', steps: 1, toolCalls: 0, usage: { inputTokens: 0, outputTokens: 0, estimated: false }, goalContinues: true }, { turn: 'turn_1' });
  b.push('turn/start', { source: 'goal_continuation', messageIds: [], settings: goalSettings() }, { turn: 'turn_2' });
  b.turn = 'turn_2';
  b.startStep(1).startAttempt().endAttempt();
  // the builder's attempts report 100 + 20 tokens and no price
  const used = () => ({ tokens: b.events.filter((e) => e.type === 'attempt/end').length * 120, seconds: 1, costUsd: null });
  b.push('goal/updated', { goalId: 'goal_1', revision: 1, expected: 0, phase: 'active', reason: 'done', by: 'model', requested: 'complete', usage: used() }, { turn: 'turn_2' });
  b.answer('two').endStep('final');
  b.push('goal/updated', { goalId: 'goal_1', revision: 2, expected: 1, phase: 'complete', reason: 'done', by: 'runtime', usage: used() }, { turn: 'turn_2' });
  return b.endTurn('completed', 'two').events;
}

/**
 * A goal with a token budget of 500 over two turns, each attempt reserving 300 against the goal
 * and charged 120. Seqs: 3 goal/created; turn 1: 7 reserved, 9 settled; turn 2: 17 reserved, 19 settled.
 */
function goalBudgeted(): ActorEvent[] {
  const b = new LogBuilder();
  const attempt = (turn: string) => {
    b.turn = turn;
    b.startStep(1).startAttempt();
    const id = `rsv_goal_${b.attempt}`;
    const ids = { turn: b.turn, step: b.step };
    b.push('budget/reserved', { reservationId: id, scope: 'goal', goalId: 'goal_1', kind: 'attempt', attemptId: b.attempt!, tokens: 300, costUsd: null, outputTokens: 10 }, ids);
    b.endAttempt();
    b.push('budget/settled', { reservationId: id, tokens: 120, costUsd: null, outcome: 'charged' }, ids);
    b.push('assistant/accepted', { content: 'one', toolCalls: [], finishReason: 'stop' }, { ...ids, attempt: b.attempt });
    b.endStep('final');
  };
  b.receive('msg_1').push('turn/start', { source: 'user_message', messageIds: ['msg_1'], settings: goalSettings() }, { turn: 'turn_1' });
  b.push('goal/created', { goalId: 'goal_1', objective: 'notes', budget: { tokens: 500 }, maxIdleTurns: 2 }, { turn: 'turn_1' });
  attempt('turn_1');
  b.push('turn/end', { outcome: 'completed', reason: null, answer: 'one', steps: 1, toolCalls: 0, usage: { inputTokens: 0, outputTokens: 0, estimated: false }, goalContinues: true }, { turn: 'turn_1' });
  b.push('turn/start', { source: 'goal_continuation', messageIds: [], settings: goalSettings() }, { turn: 'turn_2' });
  attempt('turn_2');
  return b.endTurn('completed', 'one').events;
}

/** The `i`-th (0-based) goal-scope reservation's index in `r`. */
function goalReservation(r: RawEvent[], i: number): number {
  return indexOf(r, 'budget/reserved', i + 1);
}

function goalSettings() {
  return { model: 'scripted', baseUrl: null, workspace: '/ws', tools: [], instructions: '', budgets: { maxSteps: null, maxToolCalls: null, deadlineAt: null }, maxAttempts: 3 };
}


/** The clean tool turn (it reads notes.txt) run under `cited`, answering `answer`. */
function cited(answer: string, maxCompletionRejections?: number): ActorEvent[] {
  return mutate(clean(), (r) => {
    const settings = r[indexOf(r, 'turn/start')]!.data.settings as Record<string, unknown>;
    settings.completeWhen = 'cited';
    if (maxCompletionRejections !== undefined) settings.maxCompletionRejections = maxCompletionRejections;
    (r[indexOf(r, 'assistant/accepted', 2)]!.data as Record<string, unknown>).content = answer;
  });
}

describe('verifyLog: the completion policy re-checked from the log', () => {
  it('a cited turn whose citations were all read is clean, a line anchor and ./ included', () => {
    expect(verifyLog(cited('[./notes.txt:1] lists three tasks.'), { complete: true })).toEqual([]);
  });

  it('a failed turn is not held to its policy', () => {
    const log = mutate(cited('See [other.txt].'), (r) => {
      const end = r[indexOf(r, 'turn/end')]!;
      end.data = { ...end.data, outcome: 'failed', reason: 'completion policy', answer: null };
    });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('under code-change, a completed turn whose last change has no passing verification after it is unmet', () => {
    const b = new LogBuilder();
    b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt().acceptCall('write_file').call({ name: 'write_file', effects: 'possible', recovery: 'reconcile' });
    const call = b.lastCall;
    b.startTool(call, { name: 'write_file', effects: 'possible' }).result(call).endStep('tool_calls', 1).startStep(2).answer('Done.').endStep('final');
    const log = mutate(b.endTurn().events, (r) => {
      const settings = r[indexOf(r, 'turn/start')]!.data.settings as Record<string, unknown>;
      settings.completeWhen = 'code-change';
      settings.verifyCommands = ['npm test'];
    });
    expect(pairs(verifyLog(log, { complete: true }))).toEqual([['completion.unmet', log.at(-1)!.seq]]);
  });
});

/** `inbox/received` of a message of `kind` (no request), like the log's first event. */
function received(r: RawEvent[], messageId: string, kind: string): RawEvent {
  return { ...structuredClone(r[0]!), data: { messageId, kind, from: 'client:cli', content: 'mind the tests', request: null } };
}

/** `interrupt/requested` of `messageId` in the turn of event `i`. */
function interrupt(r: RawEvent[], i: number, messageId: string): RawEvent {
  return { ...structuredClone(r[i]!), step: undefined, attempt: undefined, call: undefined, type: 'interrupt/requested', data: { messageId, by: 'client:cli', followUps: 'keep' } };
}

/**
 * A question asked and answered: step 1 calls ask_user, a person answers, step 2 answers.
 * Seqs: 11 tool/start, 12 ask/asked, 13 inbox/received (the answer), 14 ask/answered, 15 tool/result.
 */
function questioned(): ActorEvent[] {
  const b = new LogBuilder();
  b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt().acceptCall('ask_user').call({ name: 'ask_user' });
  const call = b.lastCall;
  const scope = { turn: b.turn, step: b.step, call };
  b.startTool(call, { name: 'ask_user' });
  b.push('ask/asked', { questionId: 'q_1', question: 'Go?', options: [], allowFreeText: true, sensitive: false, expiresAt: 0 }, scope);
  b.push('inbox/received', { messageId: 'msg_2', kind: 'ask_answer', from: 'client:cli', content: '{"questionId":"q_1","text":"yes"}', request: null });
  b.push('ask/answered', { questionId: 'q_1', messageId: 'msg_2', by: 'client:cli', outcome: 'answered', optionId: null, answer: 'yes' }, scope);
  b.result(call).endStep('tool_calls', 1).startStep(2).answer('Going.').endStep('final');
  return b.endTurn().events;
}

/** `actor/parked` for `apr_1` as the runtime commits it (no scope), at the time of event `i`. */
function parked(r: RawEvent[], i: number): RawEvent {
  return { ...structuredClone(r[i]!), type: 'actor/parked', turn: undefined, step: undefined, attempt: undefined, call: undefined, data: { waitingFor: 'approval', ids: ['apr_1'], commands: ['actorloop approve agt_1 apr_1'] } };
}

describe('verifyLog on a goal', () => {
  it('finds nothing wrong with a goal that continues once and completes', () => {
    expect(verifyLog(goalLog(), { complete: true })).toEqual([]);
  });

  it('finds nothing wrong with goal reservations that fit its budget across two turns, each settled once', () => {
    const log = goalBudgeted();
    expect(log.filter((e) => e.type === 'budget/reserved').map((e) => e.seq)).toEqual([7, 17]);
    expect(log.filter((e) => e.type === 'budget/settled').map((e) => e.seq)).toEqual([9, 19]);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });
});

describe('verifyLog on minimally broken logs', () => {
  it.each(cases)('$code: $name', (c) => {
    const log = c.log();
    expect(pairs(verifyLog(log, { complete: c.complete ?? false }))).toEqual([[c.code, c.seq]]);
    // What is still open at the end of the log is only a violation once the log is complete.
    if (c.complete) expect(verifyLog(log)).toEqual([]);
  });

  it('has a case for every code', () => {
    expect(new Set(cases.map((c) => c.code))).toEqual(new Set(VIOLATION_CODES));
  });

  it('reports violations in seq order, naming the event that opened what was never closed', () => {
    const log = mutate(clean(), (r) => {
      r.splice(11, 1); // tool/result: the call at seq 9 never ends
      r[1]!.actor = 'agt_other';
    });
    expect(pairs(verifyLog(log))).toEqual([['event.actor', 2], ['call.unended', 9]]);
  });

  it('checks the attempt/end usage that the schema requires, for events that skipped parsing', () => {
    const log = clean();
    (log[6]!.data as { usage?: unknown }).usage = undefined;
    expect(pairs(verifyLog(log))).toEqual([['attempt.unsettled', 7]]);
  });
});

describe('formatViolations', () => {
  it('writes one line per violation', () => {
    expect(formatViolations([
      { code: 'seq.gap', seq: 4, message: 'expected seq 3, got 4: the log skips ahead' },
      { code: 'recovery.unclosed', seq: null, message: 'no continuation' },
    ])).toBe('seq 4: seq.gap: expected seq 3, got 4: the log skips ahead\nseq -: recovery.unclosed: no continuation');
    expect(formatViolations([])).toBe('');
  });
});
