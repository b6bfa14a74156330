import { describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/database.js';
import { reciprocalRankFusion, RRF_K } from '../../src/knowledge/fusion.js';
import {
  attachKnowledgeVectors,
  type ChunkCandidate,
  KnowledgeVectors,
  withVectorCandidates,
} from '../../src/knowledge/vectors.js';
import type { ModelRegistry } from '../../src/models/registry.js';

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

describe('hybrid search results', () => {
  /** Vectors whose nearest chunks are given; no database, no provider. */
  class GivenNearest extends KnowledgeVectors {
    constructor(private readonly nearest: ChunkCandidate[]) {
      super({} as Db, {} as ModelRegistry);
    }

    override vectorCandidates(): Promise<ChunkCandidate[] | null> {
      return Promise.resolve(this.nearest);
    }
  }

  const chunk = (text: string, score: number): ChunkCandidate => ({
    file_id: `fil_${text}`,
    path: `${text}.md`,
    name: `${text}.md`,
    text,
    heading: null,
    pages: null,
    score,
  });

  it('keep a score that never rises down the list, the lexical head kept in place', async () => {
    // Fused alone: x, y, lexicalTop, v. The lexical top is kept second (rank 0 → at most
    // position 1), ahead of y, whose fused score is higher than its own.
    const vectors = new GivenNearest([chunk('x', 0.9), chunk('y', 0.8), chunk('v', 0.7)]);
    attachKnowledgeVectors(vectors);
    const results = await withVectorCandidates(
      vectors.db,
      { projectId: 'prj_x', query: 'q' },
      [chunk('lexicalTop', 5), chunk('x', 4), chunk('y', 3)],
      10,
    );
    expect(results.map((result) => result.text)).toEqual(['x', 'lexicalTop', 'y', 'v']);
    const scores = results.map((result) => result.score);
    for (let i = 1; i < scores.length; i++) expect(scores[i - 1], `${i}`).toBeGreaterThanOrEqual(scores[i]!);
  });
});
