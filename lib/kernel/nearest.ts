/** "Did you mean": the known word nearest a mistyped one, as kubectl and git suggest it. */

/** The edit distance (insertions, deletions, substitutions, and swaps of two neighbours) between two words. */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  const at = (i: number, j: number): number => (rows[i] as number[])[j] as number;
  for (let j = 1; j <= b.length; j++) (rows[0] as number[])[j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      // A swap of two neighbours (`paht` for `path`) is one mistake, not two.
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1);
      (rows[i] as number[])[j] = best;
    }
  }
  return at(a.length, b.length);
}

/**
 * The candidate nearest `word` (case ignored), when it is near enough to be what was meant: at most 2 edits, and
 * fewer than half the word's length (so `ab` does not suggest `xy`); undefined otherwise, and when two candidates
 * are equally near (`prod-ap` is as near `prod-eu` as `prod-us`: a guess would mislead).
 */
export function nearest(word: string, candidates: Iterable<string>): string | undefined {
  const lower = word.toLowerCase();
  let best: { candidate: string; distance: number; tied: boolean } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance < (best?.distance ?? Infinity)) best = { candidate, distance, tied: false };
    else if (best !== undefined && distance === best.distance) best.tied = true;
  }
  if (best === undefined || best.tied) return undefined;
  const limit = Math.min(2, Math.ceil(lower.length / 2) - 1);
  return best.distance <= Math.max(limit, 1) && best.distance < lower.length ? best.candidate : undefined;
}
