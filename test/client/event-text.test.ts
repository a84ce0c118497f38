// `events` in human form: each event's key fields, from events parsed by the real schema, and
// incarnations numbered 1, 2, 3… from the log (never the lease revision an epoch is).
import { describe, expect, test } from 'vitest';
import { EventDescriber, describeEvent } from '../../src/client/event-text.js';
import { callSummary } from '../../src/client/tool-summary.js';
import { LogBuilder } from '../actors/log-builder.js';

/** The fields after the head (seq, time, type) of an event's line. */
function fields(line: string): string {
  return line.replace(/^\s*\d+\s+\S+\s+\S+\s+/, '');
}

describe('EventDescriber: key fields', () => {
  test('policy, approval, prepared request, attempt model, result size and artifact', () => {
    const b = new LogBuilder();
    b.receive('msg_1').startTurn('msg_1');
    b.push('step/start', { index: 1, maxAttempts: 3, toolBudgetLeft: null, model: 'openai:gpt-4.1-mini', maxOutputTokens: null }, { turn: b.turn, step: 'step_1' });
    b.push('request/prepared', { digest: 'sha256:0123456789abcdef0123', bytes: 20_480, messages: 3 }, { turn: b.turn, step: 'step_1' });
    b.push('attempt/start', { index: 1, requestDigest: 'sha256:0123456789abcdef0123' }, { turn: b.turn, step: 'step_1', attempt: 'att_1' });
    b.push('policy/decided', { decision: 'allow', rule: 'default:read', reason: null }, { turn: b.turn, step: 'step_1', call: 'call_1' });
    b.push('approval/requested', {
      approvalId: 'apr_1', tool: 'write_file', toolVersion: '1', planDigest: 'sha256:fedcba9876543210fedc', expiresAt: Date.parse('2026-01-02T00:00:00.000Z'),
    }, { turn: b.turn, step: 'step_1', call: 'call_1' });
    b.push('tool/result', {
      ok: true, output: '[first lines]', error: null, durationMs: 12, artifact: { id: 'art_01ABC', digest: 'sha256:aa', bytes: 90_000, binary: false },
    }, { turn: b.turn, step: 'step_1', call: 'call_1' });
    b.push('tool/call', {
      index: 0, providerId: 'p1', name: 'read_file', arguments: '{"path":"src/slug.js","offset":10,"limit":5}', status: 'valid',
      error: null, effects: 'none', recovery: 'rerun', withinBudget: true,
    }, { turn: b.turn, step: 'step_1', call: 'call_2' });
    const d = new EventDescriber();
    const byType = new Map(b.events.map((e) => [e.type, fields(d.describe(e))]));
    expect(byType.get('policy/decided')).toBe('allow · default:read');
    expect(byType.get('approval/requested')).toBe('apr_1 write_file v1 · plan sha256:fedcba987654 · expires 2026-01-02T00:00:00.000Z');
    expect(byType.get('request/prepared')).toBe('20.0 KiB · 3 messages · sha256:0123456789ab');
    expect(byType.get('attempt/start')).toBe('attempt 1 · openai:gpt-4.1-mini · request sha256:0123456789ab');
    expect(byType.get('tool/result')).toBe('ok · 87.9 KiB · artifact art_01ABC · 12 ms · [first lines]');
    expect(byType.get('tool/call')).toBe('read_file src/slug.js lines 10–14');
    expect(byType.get('turn/start')).toBe('user_message · model scripted · ask · max 10 steps');
  });

  test('counts take the noun in the number they are: 1 tool call, 2 steps', () => {
    const b = new LogBuilder();
    b.receive('msg_1').startTurn('msg_1').startStep(1).endStep('tool_calls', 1).endTurn();
    const d = new EventDescriber();
    const byType = new Map(b.events.map((e) => [e.type, fields(d.describe(e))]));
    expect(byType.get('step/end')).toBe('tool_calls · 1 tool call');
    expect(byType.get('turn/end')).toMatch(/^completed · 2 steps · 1 tool call · /);
  });

  test('an incarnation is numbered from the log: 1, then 2 after a kill and its recovery, also from --after', () => {
    const b = new LogBuilder();
    b.epoch = 37;
    b.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt();
    // a lease revision, not a count
    b.crash({ killed: 'after:attempt/start' });
    b.startAttempt(2);
    b.crash({ killed: null });
    const all = (() => {
      const d = new EventDescriber();
      return b.events.map((e) => d.describe(e));
    })();
    const killed = all.filter((l) => l.includes('actor/killed')).map(fields);
    expect(killed).toEqual([
      `incarnation 1 died after seq ${b.events.findIndex((e) => e.type === 'actor/killed')} · at after:attempt/start · fault record (kill)`,
      expect.stringMatching(/^incarnation 2 died after seq \d+ · point not known · recovery found open work/),
    ]);
    expect(all.filter((l) => l.includes('actor/rehydrated')).map((l) => fields(l).split(' · ')[0])).toEqual(['incarnation 2', 'incarnation 3']);
    expect(all.join('\n')).not.toMatch(/epoch|\b3[789]\b/);
    // `events --after N`: the events up to N are taken in, not printed, and the numbers hold
    const after = b.events.findIndex((e) => e.type === 'recovery/started') + 1;
    const d = new EventDescriber();
    for (const e of b.events.slice(0, after)) d.note(e);
    expect(b.events.slice(after).map((e) => d.describe(e))).toEqual(all.slice(after));
  });

  test('an incarnation that died writing nothing is named by the next one, and the numbers after it stay', () => {
    const b = new LogBuilder();
    b.receive('msg_1').startTurn('msg_1');
    // incarnation 2 (epoch 5) died in its recovery before writing; incarnation 3 (epoch 9) finds both
    b.epoch = 9;
    const lastSeq = b.events.length;
    b.push('actor/killed', { point: 'after:tool/start', detectedBy: 'fault record (kill)', epoch: 1, lastSeq });
    b.push('actor/killed', { point: 'during:reconcile', detectedBy: 'fault record (kill)', epoch: 5, lastSeq });
    b.push('actor/rehydrated', { snapshotSeq: 0, tailEvents: lastSeq });
    const d = new EventDescriber();
    const shown = b.events.map((e) => fields(d.describe(e)));
    expect(shown.filter((l) => l.includes('died')).map((l) => l.split(' died')[0])).toEqual(['incarnation 1', 'incarnation 2']);
    expect(shown.at(-1)).toMatch(/^incarnation 3 · /);
  });

  test('describeEvent alone still says what one event is', () => {
    const b = new LogBuilder();
    b.receive('msg_1');
    expect(describeEvent(b.events[0]!)).toMatch(/inbox\/received\s+user_message msg_1 from /);
  });
});

describe('callSummary: a tool call in one line', () => {
  test.for([
    ['read_file', { path: 'src/slug.js' }, 'read_file src/slug.js'],
    ['write_file', { path: 'a.txt', content: 'x'.repeat(2048) }, 'write_file a.txt (2.0 KiB)'],
    ['shell', { command: 'npm test', cwd: 'pkg' }, 'shell npm test (in pkg)'],
    ['search', { pattern: 'TODO', path: 'src' }, 'search TODO in src'],
    ['list_dir', {}, 'list_dir .'],
    ['apply_patch', { patch: '--- a/x.js\n+++ b/x.js\n@@ -1 +1 @@\n-a\n+b\n--- a/old.txt\n+++ /dev/null\n' }, 'apply_patch x.js, old.txt (deleted)'],
    ['ask_user', { question: 'Which colour?', options: [] }, 'ask_user Which colour?'],
    ['update_plan', { items: [{ content: 'read', status: 'completed' }, { content: 'fix it', status: 'in_progress' }] }, 'update_plan 2 items, 1 done · now: fix it'],
    ['update_goal', { phase: 'complete', reason: 'tests pass', expected_revision: 2 }, 'update_goal complete (tests pass) at revision 2'],
    ['get_goal', {}, 'get_goal'],
    ['my_tool', { a: 1 }, 'my_tool {"a":1}'],
  ] as const)('%s', ([name, args, want]) => {
    expect(callSummary(name, JSON.stringify(args))).toBe(want);
  });

  test('arguments that are not JSON (a preview of big ones) are shown clipped', () => {
    expect(callSummary('write_file', '{"path":"a.txt","content":"abc')).toBe('write_file {"path":"a.txt","content":"abc');
  });
});
