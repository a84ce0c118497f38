// An unknown config key gets the suggestion an unknown flag gets from commander: the closest
// known name by Damerau-Levenshtein distance, if it is close enough to be a typo of it.

/** Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 0; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/** Commander's limits: at most 3 edits, and more than 40% of the word left as it was. */
const MAX_DISTANCE = 3;
const MIN_SIMILARITY = 0.4;

/** The known names closest to `word` (ties all returned, sorted), or none close enough to suggest. */
export function closestNames(word: string, known: readonly string[]): string[] {
  let best = MAX_DISTANCE + 1;
  let names: string[] = [];
  for (const name of new Set(known)) {
    const distance = editDistance(word, name);
    const similarity = (Math.max(word.length, name.length) - distance) / Math.max(word.length, name.length);
    if (distance > best || similarity <= MIN_SIMILARITY) continue;
    if (distance < best) {
      best = distance;
      names = [];
    }
    names.push(name);
  }
  return names.sort();
}

/** `(did you mean approval_mode?)` for an unknown key, or '' when nothing is close. */
export function didYouMean(word: string, known: readonly string[]): string {
  const names = closestNames(word, known);
  return names.length === 0 ? '' : ` (did you mean ${names.join(' or ')}?)`;
}
