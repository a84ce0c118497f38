import { z } from 'zod';
import { ConfigError } from '../protocol/errors.js';

const cache = new WeakMap<object, z.ZodType>();

/** A zod validator for a JSON Schema; a schema zod cannot read is a ConfigError. */
export function outputValidator(schema: Record<string, unknown>): z.ZodType {
  let v = cache.get(schema);
  if (!v) {
    try {
      v = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
    } catch (err) {
      throw new ConfigError('config.output_schema', `the output schema is not a JSON Schema actorloop can check: ${(err as Error).message}`, {
        hint: 'give a JSON Schema object (type, properties, required, ...)',
      });
    }
    cache.set(schema, v);
  }
  return v;
}

/**
 * Checks a final answer against the turn's output schema: null when it matches (or there is no
 * schema), else the reason, which the model is shown so it can answer again.
 */
export function checkAnswer(schema: Record<string, unknown> | null, content: string | null): string | null {
  if (!schema) return null;
  if (content === null || content.trim() === '') return 'the answer is empty; it must be JSON matching the output schema';
  let value: unknown;
  try {
    value = JSON.parse(content.trim().replace(/^```(?:json)?\s*|\s*```$/g, ''));
  } catch (err) {
    return `the answer is not JSON (${(err as Error).message.split('\n')[0]}); reply with only a JSON value matching the output schema`;
  }
  const result = outputValidator(schema).safeParse(value);
  if (result.success) return null;
  const issues = result.error.issues.slice(0, 3).map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);
  return `the answer does not match the output schema: ${issues.join('; ')}`;
}
