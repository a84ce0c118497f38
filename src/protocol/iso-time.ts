/** The last second formatted, shared by every caller (they all read one clock). */
let cachedSecond = NaN;
let cachedPrefix = '';

/** Outside the years 0000–9999 `toISOString` writes six-digit years; before 1970 the arithmetic still holds. */
const MIN_FAST_MS = -62_167_219_200_000;
const MAX_FAST_MS = 253_402_300_800_000;

/**
 * `new Date(ms).toISOString()`, cheaper: that call is costly next to a string copy, and a busy host stamps every event
 * it stages. Within one second only the milliseconds change, so the rest is formatted once a
 * second. Times that are not whole milliseconds, or outside the years 0000–9999, go to `toISOString`.
 */
export function isoOf(ms: number): string {
  if (!Number.isInteger(ms) || ms >= MAX_FAST_MS || ms < MIN_FAST_MS) return new Date(ms).toISOString();
  const second = Math.floor(ms / 1000);
  if (second !== cachedSecond) {
    cachedSecond = second;
    cachedPrefix = new Date(second * 1000).toISOString().slice(0, -4);
  }
  const m = ms - second * 1000;
  return `${cachedPrefix}${m < 10 ? '00' : m < 100 ? '0' : ''}${m}Z`;
}
