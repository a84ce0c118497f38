import { describe, expect, it } from 'vitest';
import { derivedId, ID_PREFIXES, idSchema, isId, newId, ulid, type IdKind } from '../../src/protocol/ids.js';

describe('ids', () => {
  it('draws prefixed ULIDs of every kind', () => {
    expect(newId('agent')).toMatch(/^agt_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(newId('attempt')).toMatch(/^att_/);
    expect(newId('message')).toMatch(/^msg_/);
    expect(isId('agent', newId('agent'))).toBe(true);
    expect(isId('agent', newId('turn'))).toBe(false);
    expect(isId('agent', 'agt_short')).toBe(false);
    // kinds with prefixes of every length, drawn one after another: none keeps a piece of the last
    for (let round = 0; round < 3; round++) {
      for (const [kind, prefix] of Object.entries(ID_PREFIXES) as Array<[IdKind, string]>) {
        const id = newId(kind);
        expect(id).toMatch(new RegExp(`^${prefix}_[0-9A-HJKMNP-TV-Z]{26}$`));
        expect(isId(kind, id)).toBe(true);
        expect(ulid()).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
      }
    }
  });

  it('encodes the time in the first ten characters', () => {
    // a time ahead of every ID drawn so far (IDs never go back in time)
    const ms = Date.now() + 3_600_000;
    const id = ulid(ms);
    let decoded = 0;
    for (const c of id.slice(0, 10)) decoded = decoded * 32 + '0123456789ABCDEFGHJKMNPQRSTVWXYZ'.indexOf(c);
    expect(decoded).toBe(ms);
  });

  it('is strictly increasing within one millisecond and across many draws', () => {
    const ms = Date.now();
    const same = Array.from({ length: 1000 }, () => ulid(ms));
    expect([...same].sort()).toEqual(same);
    expect(new Set(same).size).toBe(1000);
    const many = Array.from({ length: 20_000 }, () => newId('event'));
    expect([...many].sort()).toEqual(many);
    expect(new Set(many).size).toBe(many.length);
  });

  it('never goes back when the clock does', () => {
    const later = ulid(Date.now() + 7_200_000);
    const earlier = ulid(Date.now());
    expect(earlier > later).toBe(true);
  });

  it('derives the same ID from the same parts, and another from other parts', () => {
    expect(derivedId('call', 'step_1', '0')).toBe(derivedId('call', 'step_1', '0'));
    expect(derivedId('call', 'step_1', '0')).not.toBe(derivedId('call', 'step_1', '1'));
    // parts are separated: ("ab","c") and ("a","bc") differ
    expect(derivedId('call', 'ab', 'c')).not.toBe(derivedId('call', 'a', 'bc'));
    expect(isId('call', derivedId('call', 'x'))).toBe(true);
  });

  it('validates IDs in schemas with a message naming the form', () => {
    const schema = idSchema('agent');
    expect(schema.safeParse(newId('agent')).success).toBe(true);
    const bad = schema.safeParse('turn_01ARZ3NDEKTSV4RRFFQ69G5FAV');
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]?.message).toContain('agt_<ULID>');
  });
});
