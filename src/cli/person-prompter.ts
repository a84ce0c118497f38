import type { ClientTransport } from '../client/transport.js';
import type { Projection } from '../store/projection.js';
import { describeApproval, PromptInterrupted, type Prompt } from './turn/approval-prompt.js';
import { askPendingQuestions, type QuestionPrompt } from './turn/question-prompt.js';

// How a command asks the person at its terminal what the agent waits for, and sends the
// answers: the same over the bus and through the gateway, since it sends through the transport.

/** What `askPerson` needs. */
export interface AskPersonOptions {
  transport: ClientTransport;
  agentId: string;
  projection: Projection;
  /** The approvals or questions the agent waits on (the turn follower's `parked`). */
  waiting: readonly string[];
  prompt: Prompt;
  askQuestion: QuestionPrompt;
  /** Approvals and questions answered (ID → message ID): each answer sent is added. */
  answered: Map<string, string>;
  /** A Ctrl-C at a prompt: the turn is being interrupted, and nothing more is asked. */
  interrupted(): void;
}

/** Asks each approval (or each question) in turn and sends the answers; Ctrl-C at a prompt is a Ctrl-C press, not an error. */
export async function askPerson(o: AskPersonOptions): Promise<void> {
  const p = o.projection;
  const { transport, agentId, answered } = o;
  if (p.parked?.waitingFor === 'question') {
    await askPendingQuestions(p, o.waiting, o.askQuestion, answered, (questionId, answer) => transport.send({ type: 'answer', agentId, questionId, answer }), () => o.interrupted());
    return;
  }
  for (const approvalId of o.waiting) {
    const approval = p.approvals?.[approvalId];
    if (!approval || approval.state !== 'pending') continue;
    let answer;
    try {
      answer = await o.prompt(describeApproval(approvalId, approval));
    } catch (err) {
      if (!(err instanceof PromptInterrupted)) throw err;
      o.interrupted();
      // the turn is being interrupted: nothing more is asked, the log says how it ends
      return;
    }
    const { planDigest } = approval;
    const messageId = await transport.send(
      answer.decision === 'approve'
        ? { type: 'approve', agentId, approvalId, planDigest, always: answer.always }
        : { type: 'deny', agentId, approvalId, planDigest, ...(answer.reason ? { reason: answer.reason } : {}) },
    );
    answered.set(approvalId, messageId);
  }
}
