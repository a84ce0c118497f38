import { Ajv, type ValidateFunction } from 'ajv';
import { z } from 'zod';
import { EventSchema } from '../protocol/events.js';

/** What is wrong with an event: the path in it, and what. */
export interface EventIssue {
  path: string;
  message: string;
}

type Check = (event: unknown) => EventIssue | null;

interface JsonSchemaMember {
  properties?: { type?: { const?: unknown } };
}

/**
 * The log writer's check of each event before it is committed: the event schemas of
 * `src/protocol/events.ts` — the zod schemas, the one definition of a valid event — compiled
 * once to JSON Schema (`z.toJSONSchema`, which refuses anything it cannot represent) and, per
 * event type on first use, to an ajv validator. zod's `safeParse` builds a copy of every event it
 * accepts, and the garbage it made was a visible cost of every commit on a busy host, where
 * ajv's generated code allocates nothing. An event ajv
 * refuses goes to zod, whose verdict stands and whose issue is reported; readers still parse
 * every event with zod. `test/store/event-check.test.ts` requires both to agree on every event a
 * run writes and on broken variants of them.
 */
let shared: Check | undefined;

/** The process's event check, compiled on first use (the log writers share it). */
export function eventCheck(): Check {
  return (shared ??= createEventCheck());
}

export function createEventCheck(): Check {
  const fast = compileEventValidator();
  return (event) => (fast(event) ? null : byZod(event));
}

function byZod(event: unknown): EventIssue | null {
  const parsed = EventSchema.safeParse(event);
  if (parsed.success) return null;
  const issue = parsed.error.issues[0];
  return { path: issue?.path.join('.') || '(root)', message: issue?.message ?? 'invalid' };
}

/** The ajv side alone: true when the event matches its type's schema (false for an unknown type). */
export function compileEventValidator(): (event: unknown) => boolean {
  const members = new Map<string, object>();
  const json = z.toJSONSchema(EventSchema, { io: 'input', unrepresentable: 'throw' }) as { oneOf: JsonSchemaMember[] };
  for (const member of json.oneOf) {
    const type = member.properties?.type?.const;
    if (typeof type !== 'string') throw new Error('an event schema without a constant type');
    members.set(type, member);
  }
  // strict: an unknown keyword is an error, not ignored; NaN and Infinity are not numbers
  const ajv = new Ajv({ strict: true, strictNumbers: true, allErrors: false, code: { optimize: true } });
  const compiled = new Map<string, ValidateFunction>();
  return (event) => {
    const type = (event as { type?: unknown } | null)?.type;
    if (typeof type !== 'string') return false;
    let validate = compiled.get(type);
    if (!validate) {
      const member = members.get(type);
      if (!member) return false;
      validate = ajv.compile(member);
      compiled.set(type, validate);
    }
    return validate(event) === true;
  };
}
