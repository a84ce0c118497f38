import type { ActorDirectory } from '../bus/directory.js';
import type { StreamedEvent } from '../client/gateway-client.js';
import { connectionLost, type GatewaySession } from '../client/gateway-session.js';
import type { ActorEvent } from '../protocol/events.js';
import { emptyProjection, foldEvent } from '../store/projection.js';
import { askPendingQuestions, ttyQuestionPrompt, type QuestionPrompt } from './turn/question-prompt.js';
import { PromptInterrupted, describeApproval, type Prompt } from './turn/approval-prompt.js';
import { awaitingPerson } from './turn/follow-turn.js';
import { printTurnEnd, printWaiting } from './turn/turn-output.js';
import { EXIT } from './exit-codes.js';
import { cliLine } from './hints.js';
import { InterruptKey } from './interrupt-key.js';
import type { WhereConfig } from './hints.js';
import type { Out } from './output.js';
import type { RunPrinter } from './run-printer.js';

// `followTurn` for a runtime reached through the gateway: the agent's events come from an
// `events.subscribe` over the gateway's WebSocket, are folded into the projection every client
// folds, and printed by the same printer and turn-end code as a local command's. A connection
// lost on the way is made again and the subscription resumed after the last stream sequence
// seen: nothing is missed, and an event seen twice is folded once (its seq is not above the fold's).

/**
 * The directory is the gateway host's, not this command's: a remote command records no status
 * (the log is where a status comes from; the directory is a cache of it).
 */
const NO_DIRECTORY = { get: async () => null, put: async () => {} } as unknown as ActorDirectory;

/**
 * Where a resumed subscription starts: the last commit seen is read again, since a connection
 * may drop between the events of one commit (they share its stream sequence); what was folded
 * already is skipped by its seq.
 */
export function resumeAfter(lastStreamSeq: number): number {
  return Math.max(0, lastStreamSeq - 1);
}

/** What `followRemoteTurn` needs. */
export interface RemoteTurnOptions {
  session: GatewaySession;
  agentId: string;
  printer: RunPrinter;
  out: Out;
  json: boolean;
  /** Asks a person on a TTY; null: a wait for a person exits 5. */
  prompt: Prompt | null;
  /** Asks a question (default, with `prompt`: on this command's terminal). */
  askQuestion?: QuestionPrompt;
  config: WhereConfig;
  /** Events up to this log seq are folded, not printed, and a turn end among them is not the one followed. */
  printAfterSeq: number;
  /** Approvals (and questions) this command answered already (ID → message ID). */
  answered?: Map<string, string>;
  /**
   * The message carrying the task this command follows (`run --continue`, `--last`): printing
   * starts with its receipt, and a turn that ends before taking it (the one running when it came)
   * is followed past.
   */
  taskMessageId?: string;
}

/**
 * Follows the agent's next turn end through the gateway and returns the local command's exit
 * code: the outcome's, 5 when it waits for a person and no one can be asked here. Approvals and
 * questions are asked on a TTY and answered with `approval.respond` and `ask.answer`.
 */
export async function followRemoteTurn(o: RemoteTurnOptions): Promise<number> {
  const p = emptyProjection(o.agentId);
  const answered = new Map(o.answered ?? []);
  const queue: StreamedEvent[] = [];
  let wake: (() => void) | null = null;
  let failure: Error | null = null;
  let lastStreamSeq = 0;
  const poke = (): void => {
    wake?.();
    wake = null;
  };
  const subscribe = async (): Promise<void> => {
    failure = null;
    await o.session.client.subscribeEvents({ agentId: o.agentId, afterStreamSeq: resumeAfter(lastStreamSeq) }, (e) => (queue.push(e), poke()), (err) => ((failure = err), poke()));
  };
  await subscribe();
  // Ctrl-C interrupts the turn through the gateway (a second one leaves at once), as locally
  const followLine = cliLine(o.config, 'events', o.agentId, '--follow');
  const key = new InterruptKey({
    agentId: o.agentId,
    resumeLine: followLine,
    send: async () => void (await o.session.client.call('turn.interrupt', { agentId: o.agentId })),
    say: (line) => {
      o.printer.endLine();
      o.out.stderr.write(`\n${line}\n`);
    },
  });
  let left: { kind: 'leave'; sent: boolean } | null = null;
  void key.left.then((l) => ((left = l), poke()));
  const onSigint = (): void => key.press();
  process.on('SIGINT', onSigint);
  try {
    return await followLoop();
  } finally {
    key.clear();
    process.off('SIGINT', onSigint);
  }

  async function followLoop(): Promise<number> {
    const out = { directory: NO_DIRECTORY, printer: o.printer, out: o.out, json: o.json };
    let seeded = false;
    let printAfter = o.taskMessageId !== undefined ? Infinity : o.printAfterSeq;
    for (;;) {
      if (left) {
        o.printer.endLine();
        const why = left.sent ? 'the interrupt is on its way to its host' : 'its turn goes on on its host';
        o.out.stderr.write(`\nstopped following ${o.agentId}; ${why} (\`${followLine}\` follows it again)\n`);
        return EXIT.interrupted;
      }
      if (queue.length === 0) {
        if (failure) {
          if (!connectionLost(failure)) throw failure;
          o.printer.endLine();
          await o.session.reconnect(failure);
          await subscribe();
          continue;
        }
        await new Promise<void>((resolve) => (wake = resolve));
        continue;
      }
      const { event: raw, streamSeq } = queue.shift()!;
      lastStreamSeq = Math.max(lastStreamSeq, streamSeq);
      const event = raw as unknown as ActorEvent;
      if (event.seq <= p.seq) continue;
      foldEvent(p, event);
      if (printAfter === Infinity && p.inbox[o.taskMessageId!] !== undefined) printAfter = Math.max(o.printAfterSeq, event.seq - 1);
      if (event.seq <= printAfter) continue;
      if (!seeded) {
        o.printer.seedFrom(p);
        seeded = true;
      }
      if (event.type === 'inbox/cancelled') {
        for (const [id, messageId] of answered) if (messageId === event.data.messageId) answered.delete(id);
      }
      o.printer.commit([event]);
      if (event.type === 'actor/parked') {
        const waiting = awaitingPerson(p, answered);
        if (waiting.length === 0) continue;
        o.printer.endLine();
        if (!o.prompt) return printWaiting(out, { actorId: o.agentId, projection: p }, waiting, o.config);
        if (p.parked?.waitingFor === 'question') {
          // Ctrl-C at the prompt interrupts the turn (as a Ctrl-C anywhere): its end is followed as any other
          await askPendingQuestions(p, waiting, o.askQuestion ?? ttyQuestionPrompt(o.out.stdin!, o.out.stderr), answered, async (questionId, answer) => {
            const { messageId } = await o.session.client.call('ask.answer', { agentId: o.agentId, questionId, ...answer });
            return messageId;
          }, () => key.press());
          continue;
        }
        for (const approvalId of waiting) {
          const a = p.approvals?.[approvalId];
          if (!a || a.state !== 'pending') continue;
          let answer;
          try {
            answer = await o.prompt(describeApproval(approvalId, a));
          } catch (err) {
            if (!(err instanceof PromptInterrupted)) throw err;
            // a Ctrl-C at the prompt is one anywhere: the interrupt goes after its window, a second leaves
            key.press();
            break;
          }
          const { messageId } = await o.session.client.call('approval.respond', {
            agentId: o.agentId, approvalId, ...(answer.decision === 'approve' ? { decision: 'approve', always: answer.always } : { decision: 'deny', ...(answer.reason ? { reason: answer.reason } : {}) }),
          });
          answered.set(approvalId, messageId);
        }
        continue;
      }
      if (event.type === 'turn/end' && event.data.goalContinues !== true) {
        // the turn that was running when the task came: the task's own turn comes after it
        const task = o.taskMessageId !== undefined ? p.inbox[o.taskMessageId] : undefined;
        if (task?.state === 'pending') continue;
        const ended = { turnId: event.turn!, outcome: event.data.outcome, reason: event.data.reason, answer: event.data.answer, costUsd: event.data.costUsd ?? null, usage: event.data.usage };
        key.clear();
        return printTurnEnd(out, { actorId: o.agentId, projection: p }, ended, o.config);
      }
    }
  }
}
