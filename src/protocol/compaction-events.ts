import { z } from 'zod';

/** Items `[from, to)` of the closed history a checkpoint replaces: whole steps only. */
export const CompactionRangeSchema = z.object({ from: z.number().int().nonnegative(), to: z.number().int().positive() });

/**
 * Why a compaction was started: the request would not fit the window (`budget`), the provider said
 * so after the fact (`overflow`), or a person asked (`actorloop compact`, an inbox `compact`).
 */
export const CompactionTriggerSchema = z.enum(['budget', 'overflow', 'asked']);
export type CompactionTrigger = z.infer<typeof CompactionTriggerSchema>;

/**
 * Why a candidate checkpoint was not committed, or no compaction could start. `conflict`: the
 * history changed while it was made (its `historyRevision` no longer holds); the step picks a new
 * range. The others end the step `context_cannot_fit` when the request still does not fit:
 * `no_gain` (it saves fewer tokens than `compaction_min_gain_tokens`), `missing_pins` (the text
 * lost a required item), `unchanged` (the summary is the one already there), `attempt_failed` (the
 * summary's model attempt failed), `nothing_to_compact` (no closed step is left outside the kept
 * tail), `fixed_too_large` (the instructions, docs and tool schemas alone exceed the window),
 * `revision_limit` (the step made as many checkpoints as one step may).
 */
export const CompactionRejectionSchema = z.enum([
  'conflict', 'no_gain', 'missing_pins', 'unchanged', 'attempt_failed', 'nothing_to_compact', 'fixed_too_large', 'revision_limit',
]);
export type CompactionRejection = z.infer<typeof CompactionRejectionSchema>;

/**
 * The events of compaction (design §10): a compaction is started on a range of closed steps, its
 * summary is one model attempt (`attempt/start {kind: "compaction"}`), and the checkpoint is
 * committed only if the history it replaces is unchanged, it kept every required item and saves
 * enough; the full log is untouched, the projection's model-visible history becomes
 * `[task][checkpoint][verbatim tail]`. Spread into the event catalogue. Extend, never rename.
 */
export const COMPACTION_EVENT_DATA = {
  'compaction/started': z.object({
    /** The ID the checkpoint gets if it is committed (`ckpt_…`). */
    checkpoint: z.string(),
    trigger: CompactionTriggerSchema,
    range: CompactionRangeSchema,
    /** The history revision the candidate replaces: the commit is made only while it holds. */
    historyRevision: z.number().int().nonnegative(),
    /** The step's request revision this compaction makes room for (1: its first request). */
    requestRevision: z.number().int().positive(),
    /** Tokens of the request before (the whole request, counted with the target model's tokenizer). */
    tokensBefore: z.number().int().nonnegative(),
    /** The `compact` message that asked for it (`trigger: asked`). */
    messageId: z.string().optional(),
  }),
  'checkpoint/committed': z.object({
    id: z.string(),
    range: CompactionRangeSchema,
    historyRevision: z.number().int().nonnegative(),
    /** The checkpoint's text, as the model reads it in place of the range. */
    text: z.string(),
    digest: z.string(),
    tokensBefore: z.number().int().nonnegative(),
    tokensAfter: z.number().int().nonnegative(),
    /** The required items it holds verbatim (`task`, `goal`, `file src/a.ts`, …). */
    kept: z.array(z.string()),
    /** Files changed, with the digest of their content when the checkpoint was made (null: gone). */
    files: z.array(z.object({ path: z.string(), digest: z.string().nullable() })),
  }),
  'compaction/rejected': z.object({
    checkpoint: z.string(),
    reason: CompactionRejectionSchema,
    /** One line the CLI and the page print. */
    message: z.string(),
    /**
     * The step ends `context_cannot_fit: <message>` with it (the request does not fit without it);
     * false: the step assembles its request again (a conflict, or a person's ask that saved too little).
     */
    endsStep: z.boolean(),
    /** The `compact` message this answers (a person's ask that found nothing to do). */
    messageId: z.string().optional(),
  }),
} as const;
