import { describe, expect, it } from 'vitest';
import { initialTransition, type SnapshotFrom } from 'xstate';
import { toolCallMachine, type CallRecovery, type ToolCallEvent, type ToolCallInput } from '../../src/machines/tool-call.machine.js';
import type { EventData } from '../../src/protocol/events.js';
import { effects, ev, feed, send } from './events.js';

type Snap = SnapshotFrom<typeof toolCallMachine>;

const INPUT: ToolCallInput = {
  callId: 'call-1',
  name: 'write_file',
  valid: true,
  error: null,
  recovery: 'manual',
  withinBudget: true,
};
const scope = { turn: 'turn-1', step: 'step-1', call: 'call-1' };

function start(input: Partial<ToolCallInput> = {}): Snap {
  return initialTransition(toolCallMachine, { ...INPUT, ...input })[0];
}
const decided = (decision: EventData<'policy/decided'>['decision']) =>
  ev('policy/decided', { decision, rule: `rule-${decision}`, reason: null }, scope);
const toolStart = (rerun = false) =>
  ev('tool/start', { name: 'write_file', input: { path: 'a' }, effects: 'possible', idempotencyKey: 'k1', rerun }, scope);
const result = () => ev('tool/result', { ok: true, output: 'wrote 3 bytes', error: null, durationMs: 4 }, scope);
const denied = () => ev('tool/denied', { reason: 'denied by policy' }, scope);
const cancelled = (reason = 'tool_budget') => ev('tool/cancelled', { reason }, scope);
const unknown = () => ev('tool/outcome_unknown', { reason: 'crashed' }, scope);
const granted = () => ev('approval/granted', { approvalId: 'ap-1', by: 'client:cli' }, scope);
const requested = (expiresAt = 5_000) =>
  ev('approval/requested', { approvalId: 'ap-1', tool: 'write_file', toolVersion: '1', planDigest: 'sha256:p', expiresAt }, scope);
const personDenied = (reason: string | null) => ev('approval/denied', { approvalId: 'ap-1', by: 'client:cli', reason }, scope);

function fold(s: Snap, ...events: ToolCallEvent[]): Snap {
  return feed(toolCallMachine, s, events);
}
function step(s: Snap, e: ToolCallEvent) {
  return send(toolCallMachine, s, e);
}
const started = (recovery: CallRecovery = 'manual') => fold(start({ recovery }), decided('allow'), toolStart());

describe('tool-call machine', () => {
  describe('validating', () => {
    it('rejects an invalid call with its error', () => {
      const [s, actions] = initialTransition(toolCallMachine, { ...INPUT, valid: false, error: 'unknown tool "nope"' });
      expect(s.value).toBe('rejecting');
      expect(effects(actions)).toEqual([{ type: 'rejectCall', params: { callId: 'call-1', error: 'unknown tool "nope"' } }]);
    });

    it('rejects an invalid call without an error with a generic one', () => {
      const [, actions] = initialTransition(toolCallMachine, { ...INPUT, valid: false, error: null });
      expect(effects(actions)).toEqual([{ type: 'rejectCall', params: { callId: 'call-1', error: 'invalid call' } }]);
    });

    it('rejects an invalid call even when over budget', () => {
      const [s] = initialTransition(toolCallMachine, { ...INPUT, valid: false, error: 'bad args', withinBudget: false });
      expect(s.value).toBe('rejecting');
    });

    it('cancels a valid call over the tool budget', () => {
      const [s, actions] = initialTransition(toolCallMachine, { ...INPUT, withinBudget: false });
      expect(s.value).toBe('cancelling');
      expect(effects(actions)).toEqual([{ type: 'cancelCall', params: { callId: 'call-1', reason: 'tool_budget' } }]);
    });

    it('asks the policy about a valid call within budget', () => {
      const [s, actions] = initialTransition(toolCallMachine, INPUT);
      expect(s.value).toBe('deciding');
      expect(s.context).toEqual({
        ...INPUT, starts: 0, approvalId: null, approvalExpiresAt: null, denyReason: null, reconcileReason: null, reconciledOutput: null,
      });
      expect(effects(actions)).toEqual([{ type: 'decidePolicy', params: { callId: 'call-1', recheck: false } }]);
    });
  });

  describe('rejecting and cancelling', () => {
    it('re-emits rejectCall on recover and ends on the error result', () => {
      const s0 = start({ valid: false, error: 'bad args' });
      const [, fx] = step(s0, { type: 'recover' });
      expect(fx).toEqual([{ type: 'rejectCall', params: { callId: 'call-1', error: 'bad args' } }]);
      const [s] = step(s0, ev('tool/result', { ok: false, output: 'bad args', error: null, durationMs: 0 }, scope));
      expect(s.value).toBe('result');
      expect(s.status).toBe('done');
    });

    it('re-emits cancelCall on recover and ends cancelled', () => {
      const s0 = start({ withinBudget: false });
      const [, fx] = step(s0, { type: 'recover' });
      expect(fx).toEqual([{ type: 'cancelCall', params: { callId: 'call-1', reason: 'tool_budget' } }]);
      const [s] = step(s0, cancelled());
      expect(s.value).toBe('cancelled');
      expect(s.status).toBe('done');
    });
  });

  describe('deciding', () => {
    it('re-emits decidePolicy on recover', () => {
      const [s, fx] = step(start(), { type: 'recover' });
      expect(s.value).toBe('deciding');
      expect(fx).toEqual([{ type: 'decidePolicy', params: { callId: 'call-1', recheck: false } }]);
    });

    it('asks to start the tool when allowed', () => {
      const [s, fx] = step(start(), decided('allow'));
      expect(s.value).toBe('starting');
      expect(fx).toEqual([{ type: 'startTool', params: { callId: 'call-1', rerun: false } }]);
    });

    it('asks to deny the call when denied, with the policy reason when it gives one', () => {
      const [s, fx] = step(start(), decided('deny'));
      expect(s.value).toBe('denying');
      expect(fx).toEqual([{ type: 'denyCall', params: { callId: 'call-1', reason: 'denied by policy' } }]);
      const why = ev('policy/decided', { decision: 'deny', rule: 'config:1', reason: 'git push is not allowed here' }, scope);
      expect(step(start(), why)[1]).toEqual([{ type: 'denyCall', params: { callId: 'call-1', reason: 'git push is not allowed here' } }]);
    });

    it('requests an approval when the policy asks', () => {
      const [s, fx] = step(start(), decided('ask'));
      expect(s.value).toEqual({ awaiting_approval: 'requesting' });
      expect(fx).toEqual([{ type: 'requestApproval', params: { callId: 'call-1' } }]);
    });

    it('cancels on abort', () => {
      const [s, fx] = step(start(), { type: 'abort', reason: 'deadline' });
      expect(s.value).toBe('cancelling_abort');
      expect(fx).toEqual([{ type: 'cancelCall', params: { callId: 'call-1', reason: 'aborted' } }]);
    });
  });

  describe('approval', () => {
    const waiting = (expiresAt = 5_000) => fold(start(), decided('ask'), requested(expiresAt));

    it('waits with the approval and its absolute expiry once requested; recover asks nothing again', () => {
      const s = waiting();
      expect(s.value).toEqual({ awaiting_approval: 'waiting' });
      expect(s.context).toMatchObject({ approvalId: 'ap-1', approvalExpiresAt: 5_000 });
      expect(step(s, { type: 'recover' })[1]).toEqual([]);
    });

    it('re-emits requestApproval on recover before the request is committed', () => {
      const [, fx] = step(fold(start(), decided('ask')), { type: 'recover' });
      expect(fx).toEqual([{ type: 'requestApproval', params: { callId: 'call-1' } }]);
    });

    it('expires on a tick at or past its expiry, not before', () => {
      expect(step(waiting(), { type: 'tick', nowMs: 4_999 })[1]).toEqual([]);
      expect(step(waiting(), { type: 'tick', nowMs: 5_000 })[1]).toEqual([
        { type: 'expireApproval', params: { callId: 'call-1', approvalId: 'ap-1' } },
      ]);
    });

    it('rechecks the policy once approval is granted', () => {
      const [s, fx] = step(waiting(), granted());
      expect(s.value).toBe('rechecking');
      expect(fx).toEqual([{ type: 'decidePolicy', params: { callId: 'call-1', recheck: true } }]);
      expect(step(s, { type: 'recover' })[1]).toEqual([{ type: 'decidePolicy', params: { callId: 'call-1', recheck: true } }]);
    });

    it('starts after a granted approval rechecks as allowed', () => {
      const [s, fx] = step(fold(waiting(), granted()), decided('allow'));
      expect(s.value).toBe('starting');
      expect(fx).toEqual([{ type: 'startTool', params: { callId: 'call-1', rerun: false } }]);
    });

    it('denies when the recheck says deny (a new deny wins)', () => {
      const [s, fx] = step(fold(waiting(), granted()), decided('deny'));
      expect(s.value).toBe('denying');
      expect(fx).toEqual([{ type: 'denyCall', params: { callId: 'call-1', reason: 'denied by policy' } }]);
    });

    it('asks again when the recheck says ask (the approval no longer matches)', () => {
      const [s, fx] = step(fold(waiting(), granted()), decided('ask'));
      expect(s.value).toEqual({ awaiting_approval: 'requesting' });
      expect(fx).toEqual([{ type: 'requestApproval', params: { callId: 'call-1' } }]);
    });

    it("denies with the person's reason", () => {
      const [s, fx] = step(waiting(), personDenied('denied by a person: not on main'));
      expect(s.value).toBe('denying');
      expect(fx).toEqual([{ type: 'denyCall', params: { callId: 'call-1', reason: 'denied by a person: not on main' } }]);
    });

    it('cancels on abort while waiting', () => {
      const [s] = step(waiting(), { type: 'abort', reason: 'interrupted' });
      expect(s.value).toBe('cancelling_abort');
    });
  });

  describe('denying', () => {
    it('re-emits denyCall on recover and ends denied', () => {
      const s0 = fold(start(), decided('deny'));
      const [, fx] = step(s0, { type: 'recover' });
      expect(fx).toEqual([{ type: 'denyCall', params: { callId: 'call-1', reason: 'denied by policy' } }]);
      const [s] = step(s0, denied());
      expect(s.value).toBe('denied');
      expect(s.status).toBe('done');
    });
  });

  describe('starting', () => {
    const starting = () => fold(start(), decided('allow'));

    it('re-emits startTool (not a rerun: it never started) on recover', () => {
      const [s, fx] = step(starting(), { type: 'recover' });
      expect(s.value).toBe('starting');
      expect(fx).toEqual([{ type: 'startTool', params: { callId: 'call-1', rerun: false } }]);
    });

    it('is started on tool/start', () => {
      const [s, fx] = step(starting(), toolStart());
      expect(s.value).toBe('started');
      expect(s.context.starts).toBe(1);
      expect(fx).toEqual([]);
    });

    it('cancels on abort', () => {
      const [s, fx] = step(starting(), { type: 'abort', reason: 'cancelled' });
      expect(s.value).toBe('cancelling_abort');
      expect(fx).toEqual([{ type: 'cancelCall', params: { callId: 'call-1', reason: 'aborted' } }]);
    });
  });

  describe('cancelling_abort', () => {
    it('re-emits cancelCall on recover and ends cancelled', () => {
      const s0 = fold(start(), { type: 'abort', reason: 'deadline' });
      const [, fx] = step(s0, { type: 'recover' });
      expect(fx).toEqual([{ type: 'cancelCall', params: { callId: 'call-1', reason: 'aborted' } }]);
      const [s] = step(s0, cancelled('aborted'));
      expect(s.value).toBe('cancelled');
    });
  });

  describe('started', () => {
    it('ends with the result', () => {
      const [s, fx] = step(started(), result());
      expect(s.value).toBe('result');
      expect(s.status).toBe('done');
      expect(fx).toEqual([]);
    });

    it('ends outcome_unknown', () => {
      const [s, fx] = step(started(), unknown());
      expect(s.value).toBe('outcome_unknown');
      expect(s.status).toBe('done');
      expect(fx).toEqual([]);
    });

    it('lets a running tool finish on abort', () => {
      const [s, fx] = step(started(), { type: 'abort', reason: 'deadline' });
      expect(s.value).toBe('started');
      expect(fx).toEqual([]);
    });

    it.each<CallRecovery>(['rerun', 'idempotent'])('reruns on recover when recovery is %s', (recovery) => {
      const [s, fx] = step(started(recovery), { type: 'recover' });
      expect(s.value).toBe('started');
      expect(fx).toEqual([{ type: 'startTool', params: { callId: 'call-1', rerun: true } }]);
    });

    it('counts the rerun tool/start', () => {
      const [s, fx] = step(fold(started('rerun'), { type: 'recover' }), toolStart(true));
      expect(s.value).toBe('started');
      expect(s.context.starts).toBe(2);
      expect(fx).toEqual([]);
    });

    it('marks the outcome unknown on recover when recovery is manual', () => {
      const [s, fx] = step(started('manual'), { type: 'recover' });
      expect(s.value).toBe('started');
      expect(fx).toHaveLength(1);
      expect(fx[0]!.type).toBe('markOutcomeUnknown');
      expect(fx[0]!.params).toEqual({ callId: 'call-1', reason: expect.stringContaining('write_file') });
      expect(fx[0]!.params).toEqual({ callId: 'call-1', reason: expect.stringMatching(/may or may not have taken effect/) });
    });

    it('ends outcome_unknown once marked', () => {
      const s = fold(started('manual'), { type: 'recover' }, unknown());
      expect(s.value).toBe('outcome_unknown');
    });
  });

  describe('reconciling', () => {
    const reconciled = (verdict: EventData<'tool/reconciled'>['verdict'], over: Partial<EventData<'tool/reconciled'>> = {}) =>
      ev('tool/reconciled', { verdict, reason: verdict === 'unknown' ? 'the file changed' : null, output: verdict === 'applied' ? 'wrote 3 bytes' : null, durationMs: 2, ...over }, scope);
    const reconciling = (input: Partial<ToolCallInput> = {}) =>
      fold(start({ recovery: 'reconcile', ...input }), decided('allow'), toolStart(), { type: 'recover' });

    it('asks the tool on recover, and again on a recover before its verdict is in the log', () => {
      const [s, fx] = step(started('reconcile'), { type: 'recover' });
      expect(s.value).toBe('reconciling');
      expect(fx).toEqual([{ type: 'reconcileCall', params: { callId: 'call-1' } }]);
      const [again, fx2] = step(s, { type: 'recover' });
      expect(again.value).toBe('reconciling');
      expect(fx2).toEqual([{ type: 'reconcileCall', params: { callId: 'call-1' } }]);
    });

    it('applied: records the result with the output reconcile gave, then ends', () => {
      const [s, fx] = step(reconciling(), reconciled('applied'));
      expect(s.value).toBe('settling');
      expect(fx).toEqual([{ type: 'settleReconciled', params: { callId: 'call-1', output: 'wrote 3 bytes' } }]);
      expect(step(s, { type: 'recover' })[1]).toEqual(fx);
      expect(fold(s, result()).value).toBe('result');
    });

    it('not applied: starts it again as a rerun, counted as a second start', () => {
      const [s, fx] = step(reconciling(), reconciled('not_applied'));
      expect(s.value).toBe('restarting');
      expect(fx).toEqual([{ type: 'startTool', params: { callId: 'call-1', rerun: true } }]);
      expect(step(s, { type: 'recover' })[1]).toEqual(fx);
      const again = fold(s, toolStart(true));
      expect(again.value).toBe('started');
      expect(again.context.starts).toBe(2);
      // a crash in the rerun asks the tool again
      expect(step(again, { type: 'recover' })[1]).toEqual([{ type: 'reconcileCall', params: { callId: 'call-1' } }]);
    });

    it('not applied, then an abort before it started again: cancelled (nothing ran)', () => {
      const s = fold(reconciling(), reconciled('not_applied'));
      const [c, fx] = step(s, { type: 'abort', reason: 'deadline' });
      expect(c.value).toBe('cancelling_abort');
      expect(fx).toEqual([{ type: 'cancelCall', params: { callId: 'call-1', reason: 'aborted' } }]);
    });

    it('unknown with a person to confirm: asks, naming what reconcile said, then ends outcome_unknown with it', () => {
      const [s, fx] = step(reconciling({ confirmUnknown: true }), reconciled('unknown'));
      expect(s.value).toEqual({ confirming: 'requesting' });
      expect(fx).toEqual([{ type: 'requestApproval', params: { callId: 'call-1', confirmUnknown: true, reason: 'the file changed' } }]);
      const [, done] = step(fold(s, requested()), granted());
      expect(done).toEqual([{
        type: 'markOutcomeUnknown',
        params: { callId: 'call-1', reason: expect.stringMatching(/may or may not have taken effect; reconcile could not tell: the file changed; a person checked/) },
      }]);
    });

    it('unknown with nobody to ask: ends outcome_unknown with the reason, re-emitted on recover', () => {
      const [s, fx] = step(reconciling(), reconciled('unknown', { reason: 'boom' }));
      expect(s.value).toBe('closing_unknown');
      expect(fx).toEqual([{ type: 'markOutcomeUnknown', params: { callId: 'call-1', reason: expect.stringMatching(/reconcile could not tell: boom$/) } }]);
      expect(step(s, { type: 'recover' })[1]).toEqual(fx);
      expect(fold(s, unknown()).value).toBe('outcome_unknown');
    });

    it('an abort while the tool is asked ends outcome_unknown: it may have run', () => {
      const [s, fx] = step(reconciling(), { type: 'abort', reason: 'interrupted' });
      expect(s.value).toBe('closing_unknown');
      expect(fx).toEqual([{ type: 'markOutcomeUnknown', params: { callId: 'call-1', reason: expect.stringMatching(/may or may not have taken effect$/) } }]);
    });
  });

  describe('final states', () => {
    it.each([
      ['result', () => fold(started(), result())],
      ['denied', () => fold(start(), decided('deny'), denied())],
      ['cancelled', () => fold(start({ withinBudget: false }), cancelled())],
      ['outcome_unknown', () => fold(started(), unknown())],
    ] as const)('%s is done and has nothing to re-emit on recover', (value, reach) => {
      const s0 = reach();
      expect(s0.status).toBe('done');
      for (const e of [{ type: 'recover' } as const, { type: 'abort', reason: 'x' } as const, toolStart(true)]) {
        const [s, fx] = step(s0, e);
        expect(s.value).toBe(value);
        expect(fx).toEqual([]);
      }
    });

    it('is not frozen by the pure transition(): whoever folds the log must stop at status done', () => {
      // xstate's live actor drops events once done, but transition() still runs root-level
      // handlers, so a stray end event routed to a finished call would rewrite its outcome
      const s0 = fold(start(), decided('deny'), denied());
      const [s] = step(s0, result());
      expect(s.value).toBe('result');
    });
  });
});
