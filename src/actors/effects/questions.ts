import { derivedId } from '../../protocol/ids.js';
import { pendingQuestions, questionById, type Projection, type QuestionRecord } from '../../store/projection.js';
import { questionOf, type AskUserInput } from '../../tools/builtins/ask-user.js';
import { abortReason, type EffectContext } from '../agent/effect-context.js';
import type { RuntimeTool, RuntimeToolRun } from '../agent/runtime-tool.js';
import { CLIENT_SENDER } from './tool-policy.js';
import { sealText, unsealText } from '../agent/sealed-text.js';
import { blobScope, missingBlob } from '../agent/missing-blob.js';

// Questions a person answers (design §6): `ask_user` commits `ask/asked` and its call stays
// started, with no end, until `ask/answered` and the call's end are committed together — by an
// answer from the inbox, the question's persisted expiry, or the turn's abort. Nothing of the
// wait lives in memory alone: a rerun after a crash finds the question in the log and waits again.

/** What a sensitive answer is shown as, everywhere but in the model's request. */
export const SENSITIVE = '[sensitive]';

/** The question a call asks: derived from the call ID, so a rerun after a crash finds the same one. */
export function questionIdOf(callId: string): string {
  return derivedId('question', 'ask_user', callId);
}

/** The content of an `ask_answer` inbox message. */
export interface QuestionAnswer {
  questionId: string;
  optionId?: string;
  text?: string;
}

/** The inbox message content that answers a question (what `actorloop answer` sends). */
export function answerContent(a: QuestionAnswer): string {
  return JSON.stringify({ questionId: a.questionId, ...(a.optionId !== undefined ? { optionId: a.optionId } : {}), ...(a.text !== undefined ? { text: a.text } : {}) });
}

/** Why an answer does not fit a question (null: it does). Says nothing of the answer's text. */
export function answerMismatch(q: Pick<QuestionRecord, 'options' | 'allowFreeText'>, a: Omit<QuestionAnswer, 'questionId'>): string | null {
  if (a.optionId === undefined && a.text === undefined) return 'the answer names no option and has no text';
  if (a.text !== undefined && a.text.trim() === '') return 'the answer text is empty';
  if (a.optionId !== undefined && !q.options.some((o) => o.id === a.optionId)) {
    const ids = q.options.map((o) => o.id);
    return `the question has no option "${a.optionId}"${ids.length > 0 ? ` (its options: ${ids.join(', ')})` : ' (it has no options)'}`;
  }
  if (a.text !== undefined && !q.allowFreeText) return `the question takes no free text: pick one of its options (${q.options.map((o) => o.id).join(', ')})`;
  return null;
}

/** Parses an answer's content; null when it is not `{questionId, optionId?, text?}`. */
export function parseQuestionAnswer(content: string): QuestionAnswer | null {
  let v: unknown;
  try {
    v = JSON.parse(content);
  } catch {
    return null;
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  if (typeof o.questionId !== 'string') return null;
  if (o.optionId !== undefined && typeof o.optionId !== 'string') return null;
  if (o.text !== undefined && typeof o.text !== 'string') return null;
  return {
    questionId: o.questionId,
    ...(typeof o.optionId === 'string' ? { optionId: o.optionId } : {}),
    ...(typeof o.text === 'string' ? { text: o.text } : {}),
  };
}

/**
 * True when an `ask_answer`'s content must not be committed to the log: unless it names a known
 * question that is not sensitive, it may be a secret (an answer to a sensitive question, or one
 * so malformed that nobody can tell which question it meant).
 */
export function keepsOutOfLog(p: Projection, content: string): boolean {
  const a = parseQuestionAnswer(content);
  const q = a ? p.questions?.[a.questionId] : undefined;
  return q === undefined || q.sensitive;
}

/** What the model reads of an answer. */
function observationOf(q: QuestionRecord, a: QuestionAnswer): string {
  const lines: string[] = [];
  if (a.optionId !== undefined) {
    const label = q.options.find((o) => o.id === a.optionId)?.label ?? '';
    lines.push(`The person chose option "${a.optionId}": ${label}`);
  }
  if (a.text !== undefined) lines.push(`${a.optionId !== undefined ? 'They added' : 'The person answered'}: ${a.text}`);
  if (q.sensitive) lines.push('(This answer is sensitive: use it where it is needed, and do not repeat it in your answer or in files.)');
  return lines.join('\n');
}

/** The open call a question waits in, with its scope; null when that call has ended or its step closed. */
function openScope(a: EffectContext, q: QuestionRecord): { turn: string; step: string; call: string } | null {
  const turn = a.projection.openTurn;
  const step = a.projection.openStep;
  const call = a.projection.pending.calls.find((c) => c.callId === q.callId);
  if (!turn || !step || !call || call.observation !== null) return null;
  return { turn: turn.id, step: step.id, call: q.callId };
}

/**
 * A person's `ask_answer`: checked against the questions the log holds. Refused (committed as
 * `inbox/cancelled` with why, nothing else changes): a sender that is not a client command,
 * content that is not an answer, an unknown question, one no longer pending or past its expiry,
 * an option the question lacks, free text where it takes none. Otherwise `ask/answered` and the
 * call's `tool/result` in one commit. A sensitive answer is read from the blob the inbox door
 * kept it in; the log and the logs get `[sensitive]` and blob references only.
 */
export async function answerQuestion(a: EffectContext, messageId: string, from: string, content: string): Promise<void> {
  const refuse = (reason: string): void => {
    a.stage({ type: 'inbox/cancelled', data: { messageId, reason } });
    // the reason never quotes the answer: it may be a secret
    a.logger.warn({ messageId, from }, `question answer refused: ${reason}`);
  };
  if (!CLIENT_SENDER.test(from)) return refuse(`questions are answered by client commands (actorloop answer), not by ${from}`);
  const ref = a.projection.inbox[messageId]?.contentRef;
  const text = ref ? await unsealText(a.ports.blobs, ref) : content;
  // a person can say it again: the refusal names the blob and its event, and the question waits on
  if (text === undefined) return refuse(`the answer was kept out of the log, and ${(await missingBlob(blobScope(a), ref!, 'a sensitive answer')).message}; answer again`);
  const answer = parseQuestionAnswer(text);
  if (!answer) return refuse('the message is not an answer ({questionId, optionId?, text?})');
  const q = questionById(a.projection, answer.questionId);
  if (!q) return refuse(`no question ${answer.questionId} was asked`);
  if (q.state !== 'pending') return refuse(`question ${answer.questionId} is already ${q.state}; a question is answered once`);
  const ids = openScope(a, q);
  if (!ids) return refuse(`question ${answer.questionId} belongs to a call that is no longer open`);
  if (a.ports.clock.nowMs() >= q.expiresAt) {
    refuse(`question ${answer.questionId} expired at ${new Date(q.expiresAt).toISOString()}`);
    expireQuestion(a, answer.questionId);
    return;
  }
  const mismatch = answerMismatch(q, answer);
  if (mismatch) return refuse(`${mismatch} (question ${answer.questionId})`);
  const observation = observationOf(q, answer);
  const durationMs = Math.max(0, a.ports.clock.nowMs() - (q.askedAt ?? a.ports.clock.nowMs()));
  if (q.sensitive) {
    // stored before the events that name them are committed: the log never points at a missing blob
    const answerRef = await sealText(a.ports.blobs, answerText(answer));
    const outputRef = await sealText(a.ports.blobs, observation);
    a.stage({
      type: 'ask/answered', ...ids,
      data: { questionId: answer.questionId, messageId, by: from, outcome: 'answered', optionId: null, answer: SENSITIVE, answerRef },
    });
    a.stage({
      type: 'tool/result', ...ids,
      data: { ok: true, output: SENSITIVE, error: null, durationMs, artifact: null, source: 'person', trust: 'trusted', outputRef },
    });
    return;
  }
  a.stage({
    type: 'ask/answered', ...ids,
    data: { questionId: answer.questionId, messageId, by: from, outcome: 'answered', optionId: answer.optionId ?? null, answer: observation },
  });
  a.stage({ type: 'tool/result', ...ids, data: { ok: true, output: observation, error: null, durationMs, artifact: null, source: 'person', trust: 'trusted' } });
}

/** The answer as a person gave it: the option and the text. */
function answerText(a: QuestionAnswer): string {
  return [a.optionId !== undefined ? `option ${a.optionId}` : null, a.text ?? null].filter((x) => x !== null).join(': ');
}

/** Ends a question nobody answered before its (persisted) expiry: the model is told it expired unanswered. */
export function expireQuestion(a: EffectContext, questionId: string): void {
  const q = a.projection.questions?.[questionId];
  const ids = q && q.state === 'pending' ? openScope(a, q) : null;
  if (!q || !ids) return;
  const why = `nobody answered the question before it expired at ${new Date(q.expiresAt).toISOString()}`;
  a.stage({ type: 'ask/answered', ...ids, data: { questionId, messageId: null, by: 'expiry', outcome: 'expired', optionId: null, answer: '' } });
  a.stage({
    type: 'tool/result', ...ids,
    data: {
      ok: false,
      output: `The question expired unanswered: ${why}. Go on without the answer, or ask again if you cannot.`,
      error: { code: 'ask.expired', message: why, retryable: false },
      durationMs: Math.max(0, q.expiresAt - (q.askedAt ?? q.expiresAt)),
      artifact: null,
      source: 'person',
      trust: 'trusted',
    },
  });
}

/** Expires every pending question whose expiry is at or before `nowMs` (from the actor's timer). */
export function expireDueQuestions(a: EffectContext, nowMs: number): void {
  for (const q of pendingQuestions(a.projection)) if (q.expiresAt <= nowMs) expireQuestion(a, q.questionId);
}

/**
 * The turn stops waiting (an interrupt, its deadline): the question is cancelled and the call
 * ends `tool/cancelled`. Asking had no effect on the world, so the cancel is confirmed.
 */
export function cancelQuestion(a: EffectContext, questionId: string, reason: string): void {
  const q = a.projection.questions?.[questionId];
  const ids = q && q.state === 'pending' ? openScope(a, q) : null;
  if (!q || !ids) return;
  a.stage({ type: 'ask/answered', ...ids, data: { questionId, messageId: null, by: 'abort', outcome: 'cancelled', optionId: null, answer: '' } });
  a.stage({ type: 'tool/cancelled', ...ids, data: { reason } });
}

/**
 * `ask_user` as the runtime runs it, once its `tool/start` is committed: asks (unless a run
 * before a crash already did: the question ID is derived from the call) with an absolute expiry,
 * and returns, leaving the call started; the actor's question watch parks it and expires it, an
 * answer or the turn's abort ends it. It has no timeout of its own.
 */
export const askUserRuntime: RuntimeTool = {
  name: 'ask_user',
  async run(a: EffectContext, r: RuntimeToolRun): Promise<void> {
    const questionId = questionIdOf(r.ids.call);
    const signal = a.signal;
    if (!a.projection.questions?.[questionId]) {
      const asked = questionOf(r.input as AskUserInput);
      a.stage({
        type: 'ask/asked',
        ...r.ids,
        data: { questionId, ...asked, expiresAt: a.ports.clock.nowMs() + a.ports.tooling.askTtlMs },
      });
    }
    const cancel = (): void => {
      if (a.halted) return;
      cancelQuestion(a, questionId, abortReason(a));
      a.kick();
    };
    if (signal.aborted) return cancel();
    signal.addEventListener('abort', cancel, { once: true });
  },
};
