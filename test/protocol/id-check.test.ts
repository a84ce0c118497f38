// The one check of an ID given from outside (`parseId`): it accepts every ID the runtime makes,
// drawn or derived (children of children, questions, messages), and refuses anything else with
// one line naming the prefix, the characters and the length — before it can become a subject.
import { describe, expect, it } from 'vitest';
import { questionIdOf } from '../../src/actors/effects/questions.js';
import { hasCode } from '../../src/protocol/errors.js';
import { BadIdError, derivedId, ID_CODES, ID_PREFIXES, idProblem, idString, newId, parseId, type IdKind } from '../../src/protocol/ids.js';
import { childIdOf, spawnRequestId } from '../../src/protocol/subagents.js';

const KINDS = Object.keys(ID_PREFIXES) as IdKind[];

/** A small seeded PRNG: the same run every time, many shapes of input. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

/** Every kind of ID the runtime makes, many times over: drawn, derived, and a tree's derived chain. */
function runtimeIds(): Array<[IdKind, string]> {
  const rand = prng(26);
  const text = (): string => Array.from({ length: Math.floor(rand() * 40) }, () => String.fromCharCode(1 + Math.floor(rand() * 0x2fff))).join('');
  const out: Array<[IdKind, string]> = [];
  for (let i = 0; i < 200; i++) {
    for (const kind of KINDS) {
      out.push([kind, newId(kind)], [kind, newId(kind, Math.floor(rand() * 2 ** 47))], [kind, derivedId(kind, text(), text())]);
    }
    // a child's ID derives from its parent's spawn request, which derives from the spawning call:
    // down a tree of depth 4, each level's call in a step of the level above
    let parentStep = newId('step') as string;
    for (let depth = 0; depth < 4; depth++) {
      const call = derivedId('call', parentStep, String(Math.floor(rand() * 8)));
      const request = spawnRequestId(call);
      const child = childIdOf(request);
      out.push(['call', call], ['message', request], ['agent', child], ['question', questionIdOf(call)]);
      parentStep = derivedId('step', child, 'turn', String(depth));
    }
  }
  return out;
}

describe('parseId', () => {
  it('accepts every ID the runtime makes, drawn or derived, and returns it unchanged', () => {
    const ids = runtimeIds();
    expect(ids.length).toBeGreaterThan(3000);
    for (const [kind, id] of ids) {
      expect(idProblem(kind, id), `${kind} ${id}`).toBeNull();
      expect(parseId(kind, id)).toBe(id);
      expect(idString(kind).safeParse(id).success, id).toBe(true);
    }
  });

  it('refuses an ID of another kind', () => {
    for (const kind of KINDS) {
      for (const other of KINDS.filter((k) => !ID_PREFIXES[k].startsWith(ID_PREFIXES[kind]) && !ID_PREFIXES[kind].startsWith(ID_PREFIXES[k]))) {
        expect(() => parseId(kind, newId(other)), `${kind} ← ${other}`).toThrow(BadIdError);
      }
    }
  });

  const malformed: Array<[string, string, RegExp]> = [
    ['a wildcard', 'agt_*', /holds "\*", which no ID holds, and has 1 character after agt_, not 26/],
    ['a full wildcard', 'agt_>', /holds ">"/],
    ['a subject separator', 'agt_01ABCDEFGHJKMNPQRSTVWXY.Z', /holds "\."/],
    ['a path', '../../etc', /does not start with agt_/],
    ['a raw NUL', '\u0000', /^"\\u0000" is not an agent ID/],
    ['an escaped NUL', '%00', /does not start with agt_/],
    ['a percent-escape', 'agt_%E0%A4%A', /holds "%"/],
    ['lower case', 'agt_01abcdefghjkmnpqrstvwxyz0', /holds "a"/],
    ['a letter Crockford leaves out', 'agt_01ABCDEFGHJKMNPQRSTVWXYI', /holds "I"/],
    ['one short', 'agt_01ABCDEFGHJKMNPQRSTVWXYZ0', /has 25 characters after agt_, not 26/],
    ['the prefix alone', 'agt_', /has 0 characters/],
    ['nothing', '', /^"" is not an agent ID: it does not start with agt_/],
    ['a property of every object', 'constructor', /does not start with agt_/],
    ['the prototype', '__proto__', /does not start with agt_/],
    ['a method of every object', 'toString', /does not start with agt_/],
    ['a newline', 'agt_01ABCDEFGHJKMNPQRSTVWXY\nZ', /holds "\\n"/],
  ];

  it.each(malformed)('refuses %s with one line saying what is wrong, the form, and a stable code', (_what, text, why) => {
    let err: unknown;
    try {
      parseId('agent', text);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(BadIdError);
    expect(hasCode(err, ID_CODES.bad)).toBe(true);
    const message = (err as BadIdError).userMessage();
    expect(message).toMatch(why);
    expect(message).toContain('an agent ID is agt_<ULID>: 26 characters of 0-9 and A-Z but I, L, O and U');
    expect(message.split('\n')).toHaveLength(1);
    // no control character reaches a terminal or a log line
    expect(message).not.toMatch(/[\u0000-\u001f]/);
  });

  it('quotes a long ID cut short, with its length, and says it is too long', () => {
    const long = `agt_${'A'.repeat(5000)}`;
    const message = idProblem('agent', long)!;
    expect(message).toContain('… (5,004 characters)');
    expect(message).toContain('has 5,000 characters after agt_, not 26');
    expect(message.length).toBeLessThan(300);
  });

  it('names the kind it expected: an approval, a question', () => {
    expect(idProblem('approval', 'agt_01ABCDEFGHJKMNPQRSTVWXYZ01')).toMatch(/^"agt_01ABCDEFGHJKMNPQRSTVWXYZ01" is not an approval ID: it does not start with apr_/);
    expect(idProblem('question', 'q_NOPE')).toMatch(/is not a question ID: it holds "O", which no ID holds, and has 4 characters after q_, not 26 \(a question ID is q_<ULID>/);
  });

  it('in a wire schema, the issue is the same line', () => {
    const r = idString('agent').safeParse('agt_*');
    expect(r.success).toBe(false);
    expect(r.error!.issues[0]!.message).toBe(idProblem('agent', 'agt_*'));
  });
});
