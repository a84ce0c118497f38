import { createInterface } from 'node:readline/promises';
import { newId } from '../../protocol/ids.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import type { ApprovalRecord } from '../../store/projection.js';
import { terminalText } from '../terminal-text.js';

/** A person's answer to one approval. */
export type ApprovalAnswer = { decision: 'approve'; always: boolean } | { decision: 'deny'; reason: string | null };

/** Asks a person about one approval (the lines describe it) and resolves with the answer. */
export type Prompt = (lines: string[]) => Promise<ApprovalAnswer>;

/** Who the CLI's answers come from: only client commands may answer approvals. */
export const CLI_SENDER = 'client:cli';

/**
 * Lines that tell a person what an approval would allow. Each shows the plan's text with its
 * control characters written out: a CR or an escape sequence in a command must not hide part of
 * it from the person approving it.
 */
export function describeApproval(approvalId: string, a: ApprovalRecord): string[] {
  const plan = (a.plan ?? {}) as { command?: string; cwd?: string; paths?: Array<{ path: string; mode: string }>; network?: boolean; input?: unknown };
  const lines = [`${a.tool} (version ${a.toolVersion}) asks for approval ${approvalId}`];
  if (plan.command !== undefined) lines.push(`command: ${plan.command}`);
  if (plan.cwd !== undefined) lines.push(`cwd: ${plan.cwd}`);
  for (const p of plan.paths ?? []) lines.push(`${p.mode === 'write' ? 'writes' : 'reads'}: ${p.path}`);
  if (plan.network) lines.push('network: yes');
  if (plan.command === undefined && (plan.paths ?? []).length === 0 && plan.input !== undefined) {
    lines.push(`arguments: ${JSON.stringify(plan.input).slice(0, 400)}`);
  }
  if (a.reason) lines.push(`why asked: ${a.reason}`);
  else if (a.rule) lines.push(`rule: ${a.rule}`);
  lines.push(`plan digest: ${a.planDigest}`, `expires: ${new Date(a.expiresAt).toISOString()}`);
  return lines.map((l) => terminalText(l));
}

/** The inbox message that carries a person's answer, bound to the plan digest they were shown. */
export function approvalMessage(agentId: string, approvalId: string, planDigest: string, answer: ApprovalAnswer): InboxMessage {
  const content =
    answer.decision === 'approve'
      ? { approvalId, decision: 'approve', planDigest, always: answer.always }
      : { approvalId, decision: 'deny', planDigest, ...(answer.reason ? { reason: answer.reason } : {}) };
  return {
    id: newId('message'),
    from: CLI_SENDER,
    to: agentId,
    kind: 'approval_response',
    target: 'now',
    wakeup: true,
    content: JSON.stringify(content),
    request: null,
    sentAt: new Date().toISOString(),
  };
}

/** Ctrl-C at a prompt: the person asked to interrupt, which is not an error of the command. */
export class PromptInterrupted extends Error {
  override readonly name = 'PromptInterrupted';
}

/**
 * Asks on the terminal: y (once), n (deny, with an optional reason), a (always for this exact
 * plan). Ctrl-C rejects with `PromptInterrupted` (readline's own error says "Aborted with Ctrl+C").
 */
export function ttyPrompt(input: NodeJS.ReadableStream, output: NodeJS.WritableStream): Prompt {
  return async (lines) => {
    const rl = createInterface({ input, output, terminal: true });
    // without a listener readline only pauses; with one, the question is given up as an interrupt
    const interrupted = new Promise<never>((_, reject) => rl.once('SIGINT', () => reject(new PromptInterrupted('Ctrl-C at the prompt'))));
    interrupted.catch(() => {});
    const question = (q: string): Promise<string> => Promise.race([rl.question(q), interrupted]);
    try {
      output.write(`\n${lines.map((l) => `  ${l}`).join('\n')}\n`);
      for (;;) {
        const reply = (await question('allow? [y]es once / [n]o / [a]lways for this exact plan: ')).trim().toLowerCase();
        if (reply === 'y' || reply === 'yes') return { decision: 'approve', always: false };
        if (reply === 'a' || reply === 'always') return { decision: 'approve', always: true };
        if (reply === 'n' || reply === 'no') {
          const reason = (await question('reason for the agent (optional): ')).trim();
          return { decision: 'deny', reason: reason === '' ? null : reason };
        }
        output.write('answer y, n or a\n');
      }
    } finally {
      rl.close();
    }
  };
}
