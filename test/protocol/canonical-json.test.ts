import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../src/cli/chaos/plan.js';
import { canonicalJson } from '../../src/protocol/canonical-json.js';

/** What canonicalJson wrote before it was written in one pass: JSON.stringify of a key-sorted copy. */
function reference(value: unknown): string {
  const sortKeys = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sortKeys);
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(v).sort()) {
        const x = (v as Record<string, unknown>)[key];
        if (x !== undefined) out[key] = sortKeys(x);
      }
      return out;
    }
    return v;
  };
  return JSON.stringify(sortKeys(value));
}

function randomValue(r: () => number, depth: number): unknown {
  const leaves: Array<() => unknown> = [
    () => null, () => undefined, () => true, () => false, () => 0, () => -0, () => 1.5e-7, () => -42, () => NaN, () => Infinity,
    () => '', () => 'plain', () => 'quote " backslash \\ newline \n tab \t', () => '😀 é \u0000 \ud800', () => () => 1,
    () => new Date(0), () => Symbol('s'),
  ];
  if (depth <= 0 || r() < 0.4) return leaves[Math.floor(r() * leaves.length)]!();
  if (r() < 0.5) return Array.from({ length: Math.floor(r() * 4) }, () => randomValue(r, depth - 1));
  const o: Record<string, unknown> = {};
  for (let i = Math.floor(r() * 5); i > 0; i--) o[['b', 'a', 'Z', '10', '9', '0', '01', '4294967295', '4294967294', 'é', 'a b', '"k"'][Math.floor(r() * 12)]!] = randomValue(r, depth - 1);
  return o;
}

describe('canonicalJson', () => {
  it('writes what JSON.stringify of a key-sorted copy writes, on 5,000 random values', () => {
    const r = mulberry32(7);
    for (let i = 0; i < 5_000; i++) {
      const v = randomValue(r, 4);
      expect(canonicalJson(v), String(i)).toBe(reference(v));
    }
  });

  it('sorts keys at every level and leaves out undefined', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, undefined, { z: 1, y: 2 }], c: undefined } })).toBe('{"a":{"d":[3,null,{"y":2,"z":1}]},"b":1}');
    expect(canonicalJson(undefined)).toBeUndefined();
    // array-index keys come first, in numeric order, as they did in the key-sorted copy
    expect(canonicalJson({ b: 1, '10': 2, '9': 3, a: 4 })).toBe('{"9":3,"10":2,"a":4,"b":1}');
  });
});
