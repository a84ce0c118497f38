import { describe, expect, it } from 'vitest';
import { EventSchema, type ActorEvent } from '../../src/protocol/events.js';
import { compileEventValidator, createEventCheck } from '../../src/store/event-check.js';
import { runTurn, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld } from '../actors/harness.js';

const world = actorTestWorld();
const rts = world.rts;

/** Every event of a turn that reads, writes, calls an unknown tool, sends bad arguments and answers, as committed. */
async function committedEvents(): Promise<ActorEvent[]> {
  const rt = await rts.open({
    script: [
      { tool_calls: [{ name: 'read_file', arguments: { path: 'src/a.txt' } }, { name: 'write_file', arguments: { path: 'b.txt', content: 'b' } }] },
      { tool_calls: [{ name: 'no_such_tool', arguments: {} }, { name: 'read_file', arguments: '{not json' }] },
      { content: 'done', usage: { input_tokens: 12, output_tokens: 3 } },
    ],
  });
  const sup = rt.supervisor();
  const { actor, ended } = await runTurn(sup, 'read, write, and answer', turnRequest(world.ws));
  expect(ended.outcome).toBe('completed');
  return rt.commits.get(actor.actorId)!.flat();
}

/** Each leaf and object of an event replaced by values of other kinds, and each object key removed. */
function* variants(value: unknown, path: string[] = []): Generator<{ path: string; apply: (root: unknown) => unknown }> {
  const set = (replacement: unknown) => (root: unknown) => {
    const copy = structuredClone(root) as Record<string, unknown>;
    if (path.length === 0) return replacement;
    let at = copy as Record<string, unknown>;
    for (const key of path.slice(0, -1)) at = at[key] as Record<string, unknown>;
    at[path.at(-1)!] = replacement;
    return copy;
  };
  if (path.length > 0) {
    for (const r of [null, 'text', 7, 1.5, -3, NaN, Infinity, true, {}, []]) yield { path: `${path.join('.')}=${String(r)}`, apply: set(r) };
  }
  if (value !== null && typeof value === 'object') {
    for (const key of Object.keys(value)) {
      const child = (value as Record<string, unknown>)[key];
      if (!Array.isArray(value)) {
        yield {
          path: `${[...path, key].join('.')} removed`,
          apply: (root) => {
            const copy = structuredClone(root) as Record<string, unknown>;
            let at = copy;
            for (const k of path) at = at[k] as Record<string, unknown>;
            delete at[key];
            return copy;
          },
        };
      }
      yield* variants(child, [...path, key]);
    }
    if (!Array.isArray(value)) yield { path: `${path.join('.')}+extra`, apply: (root) => {
      const copy = structuredClone(root) as Record<string, unknown>;
      let at = copy;
      for (const k of path) at = at[k] as Record<string, unknown>;
      at['unexpected_key'] = 1;
      return copy;
    } };
  }
}

describe('event check on write', () => {
  it('agrees with the zod schemas on every event a run commits, and on thousands of broken variants of them', async () => {
    const events = await committedEvents();
    const types = new Set(events.map((e) => e.type));
    expect(types.size).toBeGreaterThanOrEqual(14);
    const fast = compileEventValidator();
    let tried = 0;
    let refused = 0;
    for (const e of events) {
      expect(fast(e), e.type).toBe(true);
      expect(EventSchema.safeParse(e).success).toBe(true);
      for (const v of variants(e)) {
        const broken = v.apply(e);
        const zod = EventSchema.safeParse(broken).success;
        expect(fast(broken), `${e.type} ${v.path}`).toBe(zod);
        tried += 1;
        if (!zod) refused += 1;
      }
    }
    expect(tried).toBeGreaterThan(3_000);
    expect(refused).toBeGreaterThan(tried / 2);
  });

  it('reports what zod reports for a refused event, and nothing for a good one', async () => {
    const [first] = await committedEvents();
    const check = createEventCheck();
    expect(check(first)).toBeNull();
    expect(check({ ...first, seq: Infinity })).toEqual({ path: 'seq', message: expect.stringContaining('Infinity') });
    expect(check({ ...first, type: 'no/such' })).toMatchObject({ path: 'type' });
    expect(check(null)).toMatchObject({ path: '(root)' });
  });
});
