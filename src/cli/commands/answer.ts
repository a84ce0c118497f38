import { answerMismatch } from '../../actors/effects/questions.js';
import type { EffectiveConfig } from '../../config/config.js';
import { publishInbox } from '../../bus/inbox.js';
import { ConfigError, NotFoundError } from '../../protocol/errors.js';
import { lineFor, type CommandLine } from '../hints.js';
import { questionById, type Projection, type QuestionRecord } from '../../store/projection.js';
import { entryOf, foldLog, placementOf, releaseToHosts } from '../hand-off.js';
import { type Out } from '../output.js';
import { RunPrinter } from '../run-printer.js';
import { createLogger, openRuntime } from '../runtime.js';
import { followTurn } from './follow-turn.js';
import type { PersonAnswer } from './questions.js';
import { questionAnswerMessage } from '../../client/messages.js';
import { awaitHosted, hostExisting, promptFor } from './resume.js';

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

/**
 * `actorloop answer <agentId> <questionId> ("<text>" | --option ID)`: checks the answer against
 * the question the agent's log holds (nothing is sent when it does not fit), delivers it through
 * the agent's inbox as a client command, and follows the turn to its end: on the host that holds
 * the agent or takes it on this mail, else hosting it here as `resume` does.
 */
export async function answerQuestionCommand(
  agentId: string,
  questionId: string,
  text: string | undefined,
  opts: AnswerQuestionOptions,
  config: EffectiveConfig,
  out: Out,
): Promise<number> {
  const answer = answerFromArgs(text, opts);
  const rt = await openRuntime(config, createLogger(config));
  try {
    const json = opts.json === true;
    const entry = await entryOf(rt, agentId);
    const from = await foldLog(rt, entry);
    const q = questionToAnswer(agentId, questionId, from, answer, lineFor(config));
    const expired = Date.now() >= q.expiresAt;
    if (expired) {
      // the agent expires it once it is hosted (the expiry is persisted): follow that, send nothing
      out.stderr.write(`question ${questionId} expired at ${new Date(q.expiresAt).toISOString()} before it was answered: the agent goes on without the answer\n`);
    }
    const msg = questionAnswerMessage(agentId, questionId, answer);
    const answered = new Map([[questionId, expired ? 'expiry' : msg.id]]);
    const place = await placementOf(rt, agentId);
    const onHost = opts.inProcess !== true && (place.kind === 'host' || (place.kind === 'free' && place.hosts.length > 0));
    if (onHost || place.kind === 'other') {
      // nobody holds it: the answer is mail, which a host claims the agent for
      if (place.kind === 'free') await releaseToHosts(rt, entry);
      if (!expired) await publishInbox(await rt.bus.person(), msg, 'person');
      return await followTurn({
        rt, entry, from, directory: rt.bus.directory, printer: new RunPrinter(out, json), out, json,
        prompt: promptFor(out, json), answered, hosting: { kind: 'host', handedOver: place.kind === 'free' },
      });
    }
    const h = await hostExisting(agentId, rt, out, json);
    if (!expired) await h.supervisor.send(msg);
    return await awaitHosted(h, entry, from, json, out, answered);
  } finally {
    await rt.close();
  }
}
