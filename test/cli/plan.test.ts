import { describe, expect, it } from 'vitest';
import { PLAN_MODE_INSTRUCTIONS } from '../../src/actors/agent/plan-mode.js';
import { resolveSettings } from '../../src/actors/agent/turn-settings.js';
import { acceptMessage } from '../../src/cli/commands/plan.js';
import { describePlan } from '../../src/cli/turn/plan-review.js';
import { lineFor } from '../../src/cli/hints.js';
import { ConfigError } from '../../src/protocol/errors.js';
import { turnRequest } from '../helpers/runtime.js';
import { ACTOR, LogBuilder } from '../actors/log-builder.js';
import { fold } from '../actors/agent-fixture.js';

// a command with --data-dir: every hint it builds carries it
const LINE = lineFor({ sources: { data_dir: 'flag' }, dataDir: '/tmp/plans', natsUrl: null });
const PLAN = { version: 3, items: [{ content: 'Fix it', status: 'completed' as const }, { content: 'Test it', status: 'in_progress' as const }], explanation: 'why' };

/** A log with one turn (plan mode or not) that wrote PLAN, ended or still open. */
function log(opts: { planMode: boolean; ended: boolean; plan?: boolean }) {
  const b = new LogBuilder();
  const settings = resolveSettings(turnRequest('/ws', { planMode: opts.planMode, maxSteps: 9 }), null, 0, ['read_file', 'update_plan']);
  b.push('turn/start', { source: 'user_message', messageIds: [], settings }, { turn: 'turn_1' });
  if (opts.plan !== false) b.push('plan/replaced', PLAN, { turn: 'turn_1' });
  if (opts.ended) {
    b.push('turn/end', { outcome: 'completed', reason: null, answer: 'ok', steps: 1, toolCalls: 1, usage: { inputTokens: 1, outputTokens: 1, estimated: false } }, { turn: 'turn_1' });
  }
  return fold(ACTOR, b.events);
}

function refusal(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('not refused');
}

describe('plan --accept', () => {
  it('sends a user message on the person channel that starts a normal-mode turn with the plan as its content', () => {
    const msg = acceptMessage(ACTOR, log({ planMode: true, ended: true }), LINE);
    expect(msg).toMatchObject({ to: ACTOR, from: 'client:cli', kind: 'user_message', target: 'next_turn', wakeup: true });
    expect(msg.request).toMatchObject({ planMode: false, maxSteps: 9, workspace: '/ws', approvalMode: 'auto-edit' });
    expect(msg.request!.instructions).not.toContain(PLAN_MODE_INSTRUCTIONS.trim());
    expect(msg.content).toContain('The plan you wrote (version 3) was accepted');
    expect(msg.content).toContain('[x] Fix it\n[>] Test it\nExplanation: why');
  });

  it('is refused with no plan, with a turn still open, and for a plan not written in plan mode', () => {
    expect(refusal(() => acceptMessage(ACTOR, log({ planMode: true, ended: true, plan: false }), LINE)).code).toBe('cli.no_plan');
    expect(refusal(() => acceptMessage(ACTOR, log({ planMode: true, ended: false }), LINE))).toMatchObject({ code: 'cli.turn_open', hint: expect.stringContaining(`actorloop resume ${ACTOR} --data-dir /tmp/plans`) });
    expect(refusal(() => acceptMessage(ACTOR, log({ planMode: false, ended: true }), LINE)).code).toBe('cli.plan_not_waiting');
  });

  it('shows a plan with its markers, its control characters shown, not sent', () => {
    expect(describePlan({ ...PLAN, items: [{ content: 'Ring \u0007 the bell', status: 'pending' }] })).toBe(
      'plan version 3 · 0/1 done\n  [ ] Ring \\x07 the bell\n  Explanation: why\n',
    );
  });
});
