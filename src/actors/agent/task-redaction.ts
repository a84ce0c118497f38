import type { Redactor } from '../../tools/redact.js';

// A person's (or a parent's) text is redacted before the log holds it, as tool output is: the
// log, every client and the model then see `[REDACTED:<kind>]`, never the secret. A secret the
// agent needs comes as the answer to a sensitive question, or through a credential.

/** Kinds whose content is text the model reads. */
const TEXT_KINDS: ReadonlySet<string> = new Set(['user_message', 'steer', 'inject', 'follow_up']);
/** Kinds whose content is JSON holding such text: each string in it is redacted, so it stays JSON. */
const JSON_KINDS: ReadonlySet<string> = new Set(['subagent_task', 'ask_answer']);

/** An inbox message's content as the log may hold it, and how many secrets were taken out. */
export function redactedContent(kind: string, content: string, redactor: Redactor): { content: string; redactions: number } {
  if (TEXT_KINDS.has(kind)) {
    const r = redactor.redact(content);
    return { content: r.text, redactions: r.count };
  }
  if (!JSON_KINDS.has(kind)) return { content, redactions: 0 };
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    // not JSON: the door or the handler refuses it, and it is committed as text, redacted
    const r = redactor.redact(content);
    return { content: r.text, redactions: r.count };
  }
  let redactions = 0;
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') {
      const r = redactor.redact(v);
      redactions += r.count;
      return r.text;
    }
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) out[k] = walk(x);
      return out;
    }
    return v;
  };
  const out = walk(parsed);
  // unchanged content is kept byte for byte (its key order, its spacing)
  return redactions === 0 ? { content, redactions: 0 } : { content: JSON.stringify(out), redactions };
}
