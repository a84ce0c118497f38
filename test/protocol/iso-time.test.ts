import { describe, expect, it } from 'vitest';
import { isoOf } from '../../src/protocol/iso-time.js';

describe('isoOf', () => {
  it('writes what toISOString writes: across seconds, before 1970, at the edges of four-digit years, and for fractions', () => {
    const samples = [
      0, 1, 9, 10, 99, 100, 999, 1_000, 1_001, -1, -999, -1_000, -1_001, 1_764_486_000_000, 1_764_486_000_999, 1_764_486_001_000,
      -62_167_219_200_000, -62_167_219_200_001, 253_402_300_799_999, 253_402_300_800_000, 1_764_486_000_000.5,
    ];
    for (let ms = 1_764_486_000_000 - 2_500; ms < 1_764_486_000_000 + 2_500; ms += 7) samples.push(ms);
    for (const ms of samples) expect(isoOf(ms), String(ms)).toBe(new Date(ms).toISOString());
  });
});
