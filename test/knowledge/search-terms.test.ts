import { describe, expect, it } from 'vitest';
import { queryTerms, selectTerms } from '../../src/knowledge/search.js';

describe('choosing the terms a search ranks', () => {
  const frequencies = new Map([
    ['kubernetes', 12],
    ['ingress', 300],
    ['cluster', 2_500],
    ['service', 9_000],
    ['team', 60_000],
  ]);

  it('drops terms found in most chunks, and terms the index lacks', () => {
    expect(selectTerms(frequencies, ['team', 'kubernetes', 'unheard'], 100_000, 100_000)).toEqual([
      'kubernetes',
    ]);
  });

  it('takes terms rarest first while their chunks fit the budget', () => {
    const terms = queryTerms('How does the service route cluster ingress for Kubernetes?');
    expect(selectTerms(frequencies, terms, 100_000, 4_000).sort()).toEqual([
      'cluster',
      'ingress',
      'kubernetes',
    ]);
    expect(selectTerms(frequencies, terms, 100_000, 1_000).sort()).toEqual(['ingress', 'kubernetes']);
  });

  it('keeps the rarest term when every term is common or past the budget, so common words still answer', () => {
    expect(selectTerms(frequencies, ['team', 'service'], 100_000, 1_000)).toEqual(['service']);
    expect(selectTerms(new Map([['team', 90]]), ['team'], 100, 4_000)).toEqual(['team']);
  });

  it('finds nothing in an empty index', () => {
    expect(selectTerms(frequencies, ['kubernetes'], 0, 4_000)).toEqual([]);
  });
});
