import { z } from 'zod';

/**
 * Model output stored in the blob store, by digest (design §4: commits stay far below
 * max_payload). The field it stands for keeps a preview, so a reader that knows nothing of
 * blobs (an older one, `events`) still sees text; the model is always sent the whole.
 */
export const BlobRefSchema = z.object({ digest: z.string(), bytes: z.number().int().nonnegative() });
export type BlobRef = z.infer<typeof BlobRefSchema>;

/**
 * A tool call as the model asked for it; `arguments` is the raw JSON text it produced, or its
 * preview when `argumentsRef` names the blob that holds it whole.
 */
export const ToolCallRequestSchema = z.object({
  id: z.string(),
  name: z.string(),
  arguments: z.string(),
  argumentsRef: BlobRefSchema.optional(),
});
export type ToolCallRequest = z.infer<typeof ToolCallRequestSchema>;

/** One item of the model-visible history, a projection of the log. */
export const HistoryItemSchema = z.discriminatedUnion('role', [
  z.object({ role: z.literal('user'), content: z.string() }),
  z.object({
    role: z.literal('assistant'),
    content: z.string().nullable(),
    toolCalls: z.array(ToolCallRequestSchema),
    /** The blob holding `content` whole; `content` is then its preview. */
    contentRef: BlobRefSchema.optional(),
  }),
  z.object({
    role: z.literal('tool'),
    callId: z.string(),
    name: z.string(),
    content: z.string(),
    /** The blob holding what the model reads when the log may not (a sensitive answer); `content` is a placeholder. */
    contentRef: BlobRefSchema.optional(),
    /** Tool output from outside the agent: the request marks it as data, not instructions (design §10). */
    untrusted: z.boolean().optional(),
  }),
]);
export type HistoryItem = z.infer<typeof HistoryItemSchema>;

/** Token usage of one attempt, step or turn. */
export const UsageSchema = z.object({
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  /** True when any part was counted by actorloop rather than reported by the provider. */
  estimated: z.boolean().default(false),
});
export type Usage = z.infer<typeof UsageSchema>;

/** Usage of nothing. */
export const ZERO_USAGE: Usage = Object.freeze({ inputTokens: 0, outputTokens: 0, estimated: false });

/** Sums usages; the sum is estimated when any part was. */
export function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    estimated: a.estimated || b.estimated,
  };
}

/** Adds costs in USD; unknown (null) wins, since a sum with an unknown part is unknown. */
export function addCost(a: number | null, b: number | null): number | null {
  return a === null || b === null ? null : Math.round((a + b) * 1_000_000) / 1_000_000;
}
