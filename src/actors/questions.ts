import type { EffectContext } from './effect-context.js';

/**
 * A person's `ask_answer`: checked against the questions the log holds. (Questions are asked by
 * the `ask_user` tool; until it exists every answer is refused with a reason, nothing else changes.)
 */
export function answerQuestion(ctx: EffectContext, messageId: string, _from: string, _content: string): void {
  ctx.stage({ type: 'inbox/cancelled', data: { messageId, reason: 'no question of this agent is waiting for an answer' } });
}
