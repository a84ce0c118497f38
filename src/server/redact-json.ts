/** Replaces every secret in a text (the runtime's redactor: src/tools/redact.ts). */
export type RedactText = (text: string) => string;

/**
 * A JSON value with every string redacted, keys included (a secret can be a key of a tool's
 * arguments as well as a value): what the gateway serves never holds a secret the log held.
 */
export function redactJson<T>(value: T, redact: RedactText): T {
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return redact(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) out[redact(k)] = walk(x);
      return out;
    }
    return v;
  };
  return walk(value) as T;
}
