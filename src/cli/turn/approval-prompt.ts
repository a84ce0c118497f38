import { createInterface } from 'node:readline/promises';
import type { ApprovalPreview } from '../../protocol/events.js';
import type { ApprovalRecord } from '../../store/projection.js';
import type { Out } from '../output.js';
import { terminalText } from '../../client/terminal-text.js';
import { cliLine, placeholder, type WhereConfig } from '../hints.js';

import type { ApprovalAnswer } from '../../client/messages.js';

/** A person's answer to one approval. */
export type { ApprovalAnswer };

/** Asks a person about one approval (the lines describe it) and resolves with the answer. */
export type Prompt = (lines: string[]) => Promise<ApprovalAnswer>;


/**
 * Lines that tell a person what an approval binds: the tool and version, the preview recorded
 * where it was asked (a diff, the patch, the argv; an older log has none, and its plan's fields
 * are shown as they were), the resources it touches, why it was asked, the plan digest, and the
 * expiry (absolute and from `nowMs`). Each line is shown with its control characters written
 * out: a CR or an escape sequence in a command or a file must not hide part of it from the
 * person approving it.
 */
export function describeApproval(approvalId: string, a: ApprovalRecord, nowMs: number = Date.now()): string[] {
  const lines = [`${a.tool} (version ${a.toolVersion}) asks for approval ${approvalId}`];
  if (a.preview) lines.push(...previewLines(a.preview));
  else lines.push(...planLines(a.plan));
  for (const r of a.scope ?? []) lines.push(`scope: ${r.mode} ${r.key}`);
  if (a.reason && a.rule) lines.push(`why asked: ${a.reason} (rule ${a.rule})`);
  else if (a.reason) lines.push(`why asked: ${a.reason}`);
  else if (a.rule) lines.push(`why asked: rule ${a.rule}`);
  lines.push(`plan digest: ${a.planDigest}`, `expires: ${new Date(a.expiresAt).toISOString()} (${fromNow(a.expiresAt - nowMs)})`);
  return lines.map((l) => terminalText(l));
}

/** The preview: its summary, its text indented, what was left out, and why the tool's own could not be made. */
function previewLines(p: ApprovalPreview): string[] {
  const lines = [p.summary];
  if (p.fallback) lines.push(`(${p.fallback})`);
  if (p.text !== '') lines.push(...p.text.split('\n').map((l) => `  ${l}`));
  if (p.truncated) lines.push(`  … ${p.omitted ?? 'the rest is not shown'}`);
  return lines;
}

/** What a log written before previews showed: the plan's fields, else its arguments. */
function planLines(recorded: Record<string, unknown> | undefined): string[] {
  const plan = (recorded ?? {}) as { command?: string; cwd?: string; paths?: Array<{ path: string; mode: string }>; network?: boolean; input?: unknown };
  const lines: string[] = [];
  if (plan.command !== undefined) lines.push(`command: ${plan.command}`);
  if (plan.cwd !== undefined) lines.push(`cwd: ${plan.cwd}`);
  for (const p of plan.paths ?? []) lines.push(`${p.mode === 'write' ? 'writes' : 'reads'}: ${p.path}`);
  if (plan.network) lines.push('network: yes');
  if (plan.command === undefined && (plan.paths ?? []).length === 0 && plan.input !== undefined) {
    lines.push(`arguments: ${JSON.stringify(plan.input).slice(0, 400)}`);
  }
  return lines;
}

/** How far a time is from now, for a person: `in 23 h 59 min`, `in 40 s`, `expired 3 min ago`. */
export function fromNow(deltaMs: number): string {
  const s = Math.round(Math.abs(deltaMs) / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const span = h > 0 ? `${h} h${m > 0 ? ` ${m} min` : ''}` : m > 0 ? `${m} min` : `${s} s`;
  return deltaMs > 0 ? `in ${span}` : `expired ${span} ago`;
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

/** The commands that answer an approval, as a person would paste them (with this command's --data-dir / --nats). */
export function answerCommands(config: WhereConfig, agentId: string, approvalId: string): { approve: string; deny: string } {
  return {
    approve: cliLine(config, 'approve', agentId, approvalId),
    deny: cliLine(config, 'deny', agentId, approvalId, placeholder('[--reason "<why>"]')),
  };
}

/** A person to ask on this terminal, or null (not a TTY, or stdout belongs to `--json`). */
export function promptFor(out: Out, json: boolean): Prompt | null {
  if (json || !out.stdin?.isTTY || !out.stderr.isTTY) return null;
  return ttyPrompt(out.stdin, out.stderr);
}
