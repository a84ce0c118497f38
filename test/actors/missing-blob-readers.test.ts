import { describe, expect, it } from 'vitest';
import type { SubagentPort } from '../../src/actors/agent/subagent-port.js';
import { answerQuestion } from '../../src/actors/effects/questions.js';
import { sendOwedNotice } from '../../src/actors/tree/subagent-messages.js';
import type { InboxMessage } from '../../src/protocol/inbox.js';
import { DEFAULT_SUBAGENT_LIMITS, SubagentNoticeSchema, type ChildTask } from '../../src/protocol/subagents.js';
import { fakeContext } from './fake-effect-context.js';

describe('blobs an agent reads that are lost', () => {
  it("a child's notice whose whole answer is lost still goes to the parent, with the preview the log holds and why the rest is gone", async () => {
    const sent: InboxMessage[] = [];
    const port: SubagentPort = {
      limits: DEFAULT_SUBAGENT_LIMITS,
      spawn: async () => {},
      send: async (m) => void sent.push(m),
      takeSlot: async () => ({ taken: true }),
      releaseSlot: async () => {},
      firstTurn: async () => {},
    };
    const a = fakeContext({
      ports: { subagents: port, blobNaming: async (digest) => (digest === 'sha256:ab' ? { actorId: 'agent_test', type: 'turn/end', seq: 3 } : null) },
    });
    const task: ChildTask = {
      requestId: 'req_1', parentId: 'agt_parent', rootId: 'agt_parent', name: 'helper', depth: 1, task: 'do it', mode: 'background', context: 'blank',
      forkTranscript: null, permissions: { tools: [], approvalMode: 'ask', readOnly: true, workspace: '/tmp/ws', workspaceMode: 'shared' },
      budget: { maxSteps: 5, maxToolCalls: null, maxTokens: null, maxCostUsd: null, deadlineAt: null }, model: 'scripted', baseUrl: null, instructions: null,
    };
    a.given(
      { type: 'inbox/received', data: { messageId: 'msg_task', kind: 'subagent_task', from: 'agt_parent', content: JSON.stringify(task), request: null } },
      {
        type: 'turn/end', turn: 'turn_1', data: {
          outcome: 'completed', reason: null, answer: 'the head of a long answer…', answerRef: { digest: 'sha256:ab', bytes: 90_000 },
          steps: 1, toolCalls: 0, usage: { inputTokens: 1, outputTokens: 1, estimated: false }, noticeOwed: true,
        },
      },
    );
    await sendOwedNotice(a);
    expect(sent).toHaveLength(1);
    const notice = SubagentNoticeSchema.parse(JSON.parse(sent[0]!.content));
    expect(notice.answer).toBe('the head of a long answer…');
    expect(notice.reason).toMatch(
      /^the answer is its preview only: blob sha256:ab \(87\.9 KiB of its answer\) named by turn\/end seq 3 of agent_test is not in the blob store\. this is final: /,
    );
    expect(a.staged.map((e) => e.type)).toEqual(['subagent/notified']);
  });

  it('a sensitive answer whose blob is lost is refused, naming the blob and its event: a person can answer again', async () => {
    const a = fakeContext({ ports: { blobNaming: async () => ({ actorId: 'agent_test', type: 'inbox/received', seq: 1 }) } });
    a.given({
      type: 'inbox/received',
      data: { messageId: 'msg_1', kind: 'ask_answer', from: 'client:cli', content: '[sensitive]', request: null, contentRef: { digest: 'sha256:cd', bytes: 60 } },
    });
    await answerQuestion(a, 'msg_1', 'client:cli', '[sensitive]');
    expect(a.staged.map((e) => e.type)).toEqual(['inbox/cancelled']);
    expect(a.staged[0]!.data).toEqual({
      messageId: 'msg_1',
      reason: 'the answer was kept out of the log, and blob sha256:cd (60 B of a sensitive answer) named by inbox/received seq 1 of agent_test is not in the blob store; answer again',
    });
  });
});
