import { describe, expect, it } from 'vitest';
import { describeApproval, fromNow } from '../../src/cli/turn/approval-prompt.js';
import type { ApprovalRecord } from '../../src/store/projection.js';

const NOW = Date.parse('2030-01-01T00:00:00.000Z');

/** An approval as a log written before previews existed folds it: the plan, the scope, the rule. */
const OLD: ApprovalRecord = {
  callId: 'call_1',
  tool: 'write_file',
  toolVersion: '1',
  planDigest: 'sha256:abc',
  expiresAt: NOW + 90 * 60_000,
  state: 'pending',
  always: false,
  plan: { tool: 'write_file', version: '1', paths: [{ path: 'src/slug.js', mode: 'write' }], network: false, input: { path: 'src/slug.js', content: 'x' } },
  scope: [{ key: 'path:/ws/src/slug.js', mode: 'write' }],
  rule: 'default:write',
  reason: null,
};

describe('describeApproval', () => {
  it('without a preview (an older log) shows the plan fields as before, then scope, why, digest and expiry', () => {
    expect(describeApproval('apr_1', OLD, NOW)).toEqual([
      'write_file (version 1) asks for approval apr_1',
      'writes: src/slug.js',
      'scope: write path:/ws/src/slug.js',
      'why asked: rule default:write',
      'plan digest: sha256:abc',
      'expires: 2030-01-01T01:30:00.000Z (in 1 h 30 min)',
    ]);
  });

  it('with a preview shows its summary and text indented, what was cut, the reason with its rule', () => {
    const a: ApprovalRecord = {
      ...OLD,
      reason: 'write_file changes workspace files',
      preview: {
        kind: 'diff',
        summary: 'edit src/slug.js (+1 -1)',
        text: '--- a/src/slug.js\n+++ b/src/slug.js\n@@ -1,1 +1,1 @@\n-old\n+new',
        truncated: true,
        omitted: '3 more lines not shown',
      },
    };
    expect(describeApproval('apr_1', a, NOW)).toEqual([
      'write_file (version 1) asks for approval apr_1',
      'edit src/slug.js (+1 -1)',
      '  --- a/src/slug.js',
      '  +++ b/src/slug.js',
      '  @@ -1,1 +1,1 @@',
      '  -old',
      '  +new',
      '  … 3 more lines not shown',
      'scope: write path:/ws/src/slug.js',
      'why asked: write_file changes workspace files (rule default:write)',
      'plan digest: sha256:abc',
      'expires: 2030-01-01T01:30:00.000Z (in 1 h 30 min)',
    ]);
  });

  it('says when the tool could not make its preview, and never hands the terminal a control character', () => {
    const a: ApprovalRecord = {
      ...OLD,
      expiresAt: NOW - 5 * 60_000,
      preview: { kind: 'input', summary: 'write_file on src/slug.js', text: 'content: "a\u001b[2Jb\rc"', truncated: false, fallback: 'write_file could not show this call (it took longer than 2000 ms); this is its plan' },
    };
    const lines = describeApproval('apr_1', a, NOW);
    expect(lines).toContain('(write_file could not show this call (it took longer than 2000 ms); this is its plan)');
    expect(lines).toContain('  content: "a\\x1b[2Jb\\rc"');
    expect(lines.at(-1)).toBe('expires: 2029-12-31T23:55:00.000Z (expired 5 min ago)');
    expect(lines.join('\n')).not.toMatch(/[\u001b\r]/);
  });
});

describe('fromNow', () => {
  it('says hours and minutes, minutes, or seconds, ahead or past', () => {
    expect(fromNow(24 * 3600_000)).toBe('in 24 h');
    expect(fromNow(61_000)).toBe('in 1 min');
    expect(fromNow(40_000)).toBe('in 40 s');
    expect(fromNow(-3 * 3600_000 - 60_000)).toBe('expired 3 h 1 min ago');
  });
});
