/** The usual constant of reciprocal-rank fusion (Cormack et al., 2009): damps the top ranks' lead. */
export const RRF_K = 60;

/**
 * Reciprocal-rank fusion: merges ranked lists of the same items (lexical and vector results)
 * by summing 1 / (k + rank) over the lists each item appears in, rank counted from 1. Scores of
 * the lists themselves (bm25, cosine distance) are never compared, only their orders, so no
 * calibration between them is needed. Ties keep the order of the first list, then the next.
 * Returns the items with their fused score, best first.
 */
export function reciprocalRankFusion<T>(
  lists: readonly (readonly T[])[],
  keyOf: (item: T) => string,
  k = RRF_K,
): { item: T; score: number }[] {
  const fused = new Map<string, { item: T; score: number; order: number }>();
  let order = 0;
  for (const list of lists) {
    list.forEach((item, index) => {
      const key = keyOf(item);
      const entry = fused.get(key);
      const share = 1 / (k + index + 1);
      if (entry) entry.score += share;
      else fused.set(key, { item, score: share, order: order++ });
    });
  }
  return [...fused.values()]
    .sort((a, b) => b.score - a.score || a.order - b.order)
    .map(({ item, score }) => ({ item, score }));
}
