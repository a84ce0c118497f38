import { z } from 'zod';
import { BlobRefSchema } from './history.js';

/**
 * Where a contribution to a request came from (design §10): the assembler orders and budgets by
 * it, and `actorloop context` names it.
 */
export const ContributionSourceSchema = z.enum([
  'instructions', 'project_doc', 'skill_index', 'memory', 'tool_schemas', 'history', 'inbox', 'retrieval', 'checkpoint',
]);
export type ContributionSource = z.infer<typeof ContributionSourceSchema>;

/**
 * How far a contribution is trusted: `system` (the runtime's and the person's instructions),
 * `project` (AGENTS.md, skills, memory: read as guidance, never as a person's word), `untrusted`
 * (tool output, files, retrieved text: data the model is told not to obey).
 */
export const TrustSchema = z.enum(['system', 'project', 'untrusted']);
export type Trust = z.infer<typeof TrustSchema>;

/** One contribution of a prepared request as `request/prepared` records it (its content is in a blob or the log). */
export const ContributionRecordSchema = z.object({
  source: ContributionSourceSchema,
  /** What it is, within its source: a path relative to the project root, a file name, `turn`. */
  scope: z.string(),
  trust: TrustSchema,
  /** `sha256:<hex>` of the text the model was sent of it. */
  digest: z.string(),
  tokens: z.number().int().nonnegative(),
  /** True when it was left out, or cut, to fit a budget. */
  cut: z.boolean().optional(),
});
export type ContributionRecord = z.infer<typeof ContributionRecordSchema>;

/** The request's size against the window it must fit (design §10). */
export const ContextBudgetSchema = z.object({
  /** Tokens of the whole request (every contribution). */
  tokens: z.number().int().nonnegative(),
  /** The model's context window the turn runs with; null when none is known (nothing is checked). */
  window: z.number().int().positive().nullable(),
  /** Tokens kept for the answer (the output cap) and for the next observation. */
  reserve: z.number().int().nonnegative(),
  /** Counted with a tokenizer that is not the model's (four characters a token). */
  estimated: z.boolean(),
});
export type ContextBudget = z.infer<typeof ContextBudgetSchema>;

/**
 * The `data` schemas of the events that record what the model is given besides the history
 * (design §10): project docs, the skill index and loaded skills, memory. The text the model is
 * sent of each is a blob named by `textRef`, so a rebuilt request is the one that was sent, however
 * the file changed since. Spread into the event catalogue (`EventDataSchemas`). Extend, never rename.
 */
export const CONTEXT_EVENT_DATA = {
  /**
   * An AGENTS.md (or CLAUDE.md) the model is given: at a turn's first step the user's and those
   * from the project root down to the workspace (`placement: instructions`), or one of a deeper
   * directory the agent read or wrote in (`placement: after_call`, shown after that call's result).
   */
  'doc/loaded': z.object({
    path: z.string(),
    /** The directory it governs. */
    dir: z.string(),
    scope: z.enum(['user', 'project']),
    /** `sha256:<hex>` and size of the file's content as read: its version. */
    digest: z.string(),
    bytes: z.number().int().nonnegative(),
    /** The file was cut at the per-file limit when read. */
    truncated: z.boolean(),
    placement: z.enum(['instructions', 'after_call']),
    /** The call whose result it follows (`after_call`). */
    callId: z.string().optional(),
    textRef: BlobRefSchema,
  }),
  /** The skills the model is told of at a turn's first step (names and descriptions; bodies load on demand). */
  'skills/indexed': z.object({
    skills: z.array(z.object({
      name: z.string(),
      description: z.string(),
      path: z.string(),
      scope: z.enum(['project', 'user']),
      digest: z.string(),
    })),
    textRef: BlobRefSchema,
  }),
  /** `load_skill` gave the model a skill's body: the version it read (the body is the call's result). */
  'skill/loaded': z.object({ name: z.string(), path: z.string(), digest: z.string(), bytes: z.number().int().nonnegative() }),
  /** A memory file as the model is given it at a turn's first step: whole, or past its budget an index. */
  'memory/loaded': z.object({
    file: z.enum(['memory', 'user']),
    path: z.string(),
    digest: z.string(),
    bytes: z.number().int().nonnegative(),
    summarized: z.boolean(),
    textRef: BlobRefSchema,
  }),
  /**
   * Excerpts a retriever found for the turn's task at its first step (`retrieval_tokens` > 0):
   * where each came from and its version; the text the model is sent (wrapped as data) is the blob.
   */
  'retrieval/loaded': z.object({
    retriever: z.string(),
    query: z.string(),
    tokenBudget: z.number().int().nonnegative(),
    excerpts: z.array(z.object({ source: z.string(), version: z.string(), startLine: z.number().int(), endLine: z.number().int(), tokens: z.number().int().nonnegative() })),
    textRef: BlobRefSchema,
  }),
  /** The `memory` tool changed a memory file: its version before and after. */
  'memory/changed': z.object({
    file: z.enum(['memory', 'user']),
    path: z.string(),
    action: z.enum(['add', 'replace', 'remove']),
    before: z.string(),
    digest: z.string(),
    bytes: z.number().int().nonnegative(),
  }),
} as const;
