import { describe, expect, it } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { emptyProjection } from '../../src/store/projection.js';
import { foldSubagents } from '../../src/store/subagent-projection.js';

// Only the fields foldSubagents reads: the events' envelopes do not matter to it.
const event = (type: string, data: Record<string, unknown>, call?: string): ActorEvent => ({ type, data, ...(call ? { call } : {}) }) as unknown as ActorEvent;

describe('foldSubagents', () => {
  it('a notice a step\'s request included is no longer waiting for a wait (wait_agents would wait for it forever)', () => {
    const p = emptyProjection('agt_parent');
    foldSubagents(p, event('subagent/spawn_requested', {
      requestId: 'msg_req', childId: 'agt_child', name: 'worker', task: 't', mode: 'background', context: 'blank', depth: 1, permissions: {}, budget: {},
    }, 'call_1'));
    foldSubagents(p, event('subagent/spawned', { requestId: 'msg_req', childId: 'agt_child', messageId: 'msg_req' }));
    const notice = { childId: 'agt_child', name: 'worker', turn: 'turn_1', outcome: 'completed', reason: null, answer: 'done', artifacts: [], usage: { inputTokens: 1, outputTokens: 1, estimated: false }, costUsd: null };
    foldSubagents(p, event('inbox/received', { messageId: 'msg_notice', kind: 'subagent_completed', from: 'agt_child', content: JSON.stringify(notice), request: null }));
    expect(p.children!['agt_child']).toMatchObject({ state: 'completed', lastNotice: 'msg_notice' });
    foldSubagents(p, event('request/prepared', { digest: 'd', bytes: 1, messages: 2, messageIds: ['msg_other'] }));
    expect(p.children!['agt_child']!.lastNotice).toBe('msg_notice');
    foldSubagents(p, event('request/prepared', { digest: 'd', bytes: 1, messages: 3, messageIds: ['msg_notice'] }));
    expect(p.children!['agt_child']!.lastNotice).toBeUndefined();
  });
});
