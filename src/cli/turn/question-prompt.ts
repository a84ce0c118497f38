import { createInterface } from 'node:readline/promises';
import { answerMismatch } from '../../actors/effects/questions.js';
import type { PersonAnswer } from '../../client/messages.js';
import { ConfigError, NotFoundError } from '../../protocol/errors.js';
import { questionById, type Projection, type QuestionRecord } from '../../store/projection.js';
import { terminalText } from '../../client/terminal-text.js';
import { PromptInterrupted } from './approval-prompt.js';
import { cliLine, placeholder, type CommandLine, type WhereConfig } from '../hints.js';

/** A person's answer to one question: an option, their own words, or both. */
export type { PersonAnswer };

/** Asks a person one question (the lines describe it) and resolves with the answer. */
export type QuestionPrompt = (q: QuestionRecord, lines: string[]) => Promise<PersonAnswer>;

/** Lines that show a person a question: its text, its options numbered, what it takes, when it expires. */
export function describeQuestion(questionId: string, q: QuestionRecord): string[] {
  const lines = [`the agent asks (question ${questionId}):`, ...q.question.split('\n').map((l) => `  ${l}`)];
  q.options.forEach((o, i) => lines.push(`  ${i + 1}) ${o.label} [${o.id}]`));
  if (q.options.length > 0 && q.allowFreeText) lines.push('  (or answer in your own words)');
  if (q.sensitive) lines.push('sensitive: the answer reaches the agent, never its log or any output');
  lines.push(`expires: ${new Date(q.expiresAt).toISOString()}`);
  return lines.map((l) => terminalText(l));
}

/** The commands that answer a question, as a person would type them (reaching the agent where `config` does). */
export function answerCommandsFor(config: WhereConfig, agentId: string, questionId: string, q: QuestionRecord | undefined): string[] {
  const lines: string[] = [];
  if (!q || q.allowFreeText) lines.push(cliLine(config, 'answer', agentId, questionId, placeholder('"<text>"')));
  if (q && q.options.length > 0) lines.push(cliLine(config, 'answer', agentId, questionId, placeholder(`--option <${q.options.map((o) => o.id).join('|')}>`)));
  return lines;
}

/**
 * Asks on the terminal: a number picks that option, other text is the person's own words (where
 * the question takes them). A sensitive answer is not echoed. Ctrl-C rejects with `PromptInterrupted`.
 */
export function ttyQuestionPrompt(input: NodeJS.ReadableStream, output: NodeJS.WritableStream): QuestionPrompt {
  return async (q, lines) => {
    const rl = createInterface({ input, output, terminal: true });
    const interrupted = new Promise<never>((_, reject) => rl.once('SIGINT', () => reject(new PromptInterrupted('Ctrl-C at the prompt'))));
    interrupted.catch(() => {});
    try {
      output.write(`\n${lines.map((l) => `  ${l}`).join('\n')}\n`);
      const ask = q.options.length === 0 ? 'answer: ' : q.allowFreeText ? `answer (1-${q.options.length}, or your own words): ` : `pick 1-${q.options.length}: `;
      for (;;) {
        const reply = (await Promise.race([q.sensitive ? hidden(rl, output, ask) : rl.question(ask), interrupted])).trim();
        const n = /^\d+$/.test(reply) ? Number(reply) : NaN;
        if (n >= 1 && n <= q.options.length) return { optionId: q.options[n - 1]!.id };
        const byId = q.options.find((o) => o.id === reply);
        if (byId) return { optionId: byId.id };
        if (reply !== '' && q.allowFreeText) return { text: reply };
        output.write(q.options.length > 0 ? `answer with a number from 1 to ${q.options.length}${q.allowFreeText ? ', or in words' : ''}\n` : 'the answer is empty\n');
      }
    } finally {
      rl.close();
    }
  };
}

/** Reads one line without echoing it (readline writes what is typed through `_writeToOutput`). */
async function hidden(rl: ReturnType<typeof createInterface>, output: NodeJS.WritableStream, ask: string): Promise<string> {
  const r = rl as unknown as { _writeToOutput?: (s: string) => void };
  const write = r._writeToOutput;
  output.write(ask);
  r._writeToOutput = () => {};
  try {
    return await rl.question('');
  } finally {
    r._writeToOutput = write;
    output.write('\n');
  }
}

/**
 * Asks each question of `waiting` still pending, in turn, and hands each answer to `send`
 * (which delivers it and gives its message ID, kept in `answered`). Ctrl-C at a prompt calls
 * `interrupted` and asks nothing more. The local follower and the gateway's share it: only how
 * an answer and an interrupt travel differs.
 */
export async function askPendingQuestions(
  p: Projection, waiting: readonly string[], prompt: QuestionPrompt, answered: Map<string, string>,
  send: (questionId: string, answer: PersonAnswer) => Promise<string>, interrupted: () => void | Promise<void>,
): Promise<void> {
  for (const questionId of waiting) {
    const q = p.questions?.[questionId];
    if (!q || q.state !== 'pending') continue;
    let answer: PersonAnswer;
    try {
      answer = await prompt(q, describeQuestion(questionId, q));
    } catch (err) {
      if (!(err instanceof PromptInterrupted)) throw err;
      await interrupted();
      return;
    }
    answered.set(questionId, await send(questionId, answer));
  }
}

/** Options of `actorloop answer`. */
export interface AnswerQuestionOptions {
  option?: string;
  json?: boolean;
  /** Host the agent here even when a host is running (refused while a host holds it). */
  inProcess?: boolean;
}

/** The answer the command line gives: text or an option, never both, never empty. Exit 2 otherwise. */
export function answerFromArgs(text: string | undefined, opts: AnswerQuestionOptions): PersonAnswer {
  const hint = 'answer with text (actorloop answer <agent> <questionId> "<text>") or an option (--option <id>), not both';
  if (text !== undefined && opts.option !== undefined) throw new ConfigError('cli.answer_both', 'give the answer as text or as --option, not both', { hint });
  if (opts.option !== undefined) {
    if (opts.option.trim() === '') throw new ConfigError('cli.answer_empty', 'the option ID is empty', { hint });
    return { optionId: opts.option.trim() };
  }
  if (text === undefined) throw new ConfigError('cli.answer_missing', 'no answer given', { hint });
  if (text.trim() === '') throw new ConfigError('cli.answer_empty', 'the answer is empty', { hint });
  return { text };
}

/** The pending question `questionId` the answer fits; a one-line error when it does not: exit 3 when the agent never asked it, else 2. */
export function questionToAnswer(agentId: string, questionId: string, p: Projection, answer: PersonAnswer, line: CommandLine): QuestionRecord {
  const q = questionById(p, questionId);
  if (!q) {
    const pending = Object.entries(p.questions ?? {}).filter(([, x]) => x.state === 'pending').map(([id]) => id);
    throw new NotFoundError('cli.question_not_found', `${agentId} has no question ${questionId}`, {
      hint: pending.length > 0 ? `questions waiting for an answer: ${pending.join(', ')}` : `it waits for no answer (${line('events', agentId)} shows its ask/asked events)`,
    });
  }
  if (q.state !== 'pending') {
    throw new ConfigError('cli.question_answered', `question ${questionId} is already ${q.state}`, { hint: 'a question is answered once; the agent asks again if it needs to' });
  }
  const mismatch = answerMismatch(q, answer);
  if (mismatch) {
    const how = q.options.length > 0 ? `--option ${q.options.map((o) => o.id).join(' | --option ')}` : 'text';
    throw new ConfigError('cli.answer_mismatch', `${mismatch} (question ${questionId})`, { hint: `answer it with ${how}${q.allowFreeText && q.options.length > 0 ? ', or text' : ''}` });
  }
  return q;
}
