/**
 * The check of a final answer against an output schema: null when it matches, else the reason
 * written for the model. It is `checkAnswer` of `src/model/output-schema.ts`, which the host
 * passes in: `src/jobs` may not import `src/model` (test/layering.test.ts), and a model node's
 * answer must be held to the same rule, in the same words, as a turn's `--output-schema`.
 */
export type AnswerCheck = (schema: Record<string, unknown> | null, content: string | null) => string | null;

/** A model node's answer, checked: the JSON value its dependents' `when` reads, or the reason it was refused. */
export type ModelOutput = { ok: true; value: unknown } | { ok: false; error: string };

/**
 * Checks a model node's answer against its `output_schema`. On `ok: false`, `error` is the text the
 * node's next attempt is sent (and, when no retry is left, the node's failure). Without a schema
 * the answer is the text itself.
 */
export function checkModelOutput(schema: Record<string, unknown> | undefined, content: string | null, check: AnswerCheck): ModelOutput {
  if (!schema) return content === null || content.trim() === '' ? { ok: false, error: 'the answer is empty' } : { ok: true, value: content };
  const error = check(schema, content);
  if (error !== null) return { ok: false, error };
  // checkAnswer accepted it, so it parses; read it the way checkAnswer does (a ```json fence allowed)
  return { ok: true, value: JSON.parse(content!.trim().replace(/^```(?:json)?\s*|\s*```$/g, '')) };
}

/** The message a model node's retry is sent after a refused answer: the reason, and what to do. */
export function retryMessage(error: string): string {
  return `Your previous answer was refused: ${error}. Answer again with only the JSON value.`;
}
