import { z } from 'zod';
import { TurnRequestSchema } from './events.js';

/** Kinds of inbox message (design §6); later issues add behaviour to more of them. */
export const InboxKindSchema = z.enum([
  'user_message', 'steer', 'inject', 'follow_up', 'approval_response', 'ask_answer', 'interrupt',
  'job_notice', 'subagent_task', 'subagent_report', 'subagent_completed', 'control',
  // a person's change of the agent's goal (`actorloop goal <agent> pause|resume|cancel`)
  'goal_control',
  // a parent's stop of its child's running turn (`interrupt_agent`, or the parent's turn ending): the child checks the sender is its parent
  'subagent_interrupt',
  // a person's ask for a checkpoint at the next step boundary (`actorloop compact <agent>`)
  'compact',
]);
export type InboxKind = z.infer<typeof InboxKindSchema>;

/** One message in an actor's durable inbox; published with `Nats-Msg-Id = id`. */
export const InboxMessageSchema = z.object({
  id: z.string().regex(/^msg_[0-9A-HJKMNP-TV-Z]{26}$/, 'expected msg_<ULID>'),
  from: z.string().min(1),
  to: z.string().min(1),
  kind: InboxKindSchema,
  target: z.enum(['next_step', 'next_turn', 'now']),
  wakeup: z.boolean(),
  content: z.string(),
  /** Settings for the turn this message starts, when it starts one. */
  request: TurnRequestSchema.nullable().default(null),
  sentAt: z.string(),
});
export type InboxMessage = z.infer<typeof InboxMessageSchema>;
