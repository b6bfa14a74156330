import { describe, expect, it } from 'vitest';
import { reciprocalRankFusion, RRF_K } from '../../src/knowledge/fusion.js';

describe('reciprocal-rank fusion', () => {
  it('sums 1 / (k + rank) over the lists, best first, ties in first-seen order', () => {
    const fused = reciprocalRankFusion(
      [
        ['a', 'b', 'c'],
        ['c', 'd', 'a'],
      ],
      (item) => item,
    );
    expect(RRF_K).toBe(60);
    expect(fused.map((f) => f.item)).toEqual(['a', 'c', 'b', 'd']);
    expect(fused[0]!.score).toBeCloseTo(1 / 61 + 1 / 63, 12);
    expect(fused[2]!.score).toBeCloseTo(1 / 62, 12);
    expect(fused[3]!.score).toBeCloseTo(1 / 62, 12);
  });

  it('handles empty lists and a single list (its own order)', () => {
    expect(reciprocalRankFusion([[], []], (x: string) => x)).toEqual([]);
    expect(reciprocalRankFusion([['x', 'y']], (x) => x).map((f) => f.item)).toEqual(['x', 'y']);
  });
});
