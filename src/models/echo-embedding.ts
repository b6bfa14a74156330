import type { EmbeddingModelV3 } from '@ai-sdk/provider';

/** The offline development embedding model (feature-hashed words: no AI), always available. */
export const ECHO_EMBEDDING_MODEL_ID = 'atrium/echo-embedding';

/** Dimensions of the development embedding model's vectors. */
export const ECHO_EMBEDDING_DIMENSIONS = 256;

/** FNV-1a: a small, stable string hash (the same vector on every machine and run). */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** Lower-cased words of letters and digits, accents folded. */
export function embeddingWords(text: string): string[] {
  return (
    text
      .normalize('NFKD')
      .replace(/\p{M}/gu, '')
      .toLowerCase()
      .match(/[\p{L}\p{N}]+/gu) ?? []
  );
}

/**
 * A deterministic text vector without a model: each word and each 4-letter piece of a word is
 * hashed to a dimension (with a hashed sign), weighted by 1 + log of its count, and the vector
 * is normalized to length 1. Texts sharing words (or word stems) point the same way. This is
 * feature hashing, not understanding: good for demos and tests, no substitute for a real model.
 */
export function hashedEmbedding(text: string, dimensions = ECHO_EMBEDDING_DIMENSIONS): number[] {
  const counts = new Map<string, number>();
  const add = (feature: string, weight: number) => counts.set(feature, (counts.get(feature) ?? 0) + weight);
  for (const word of embeddingWords(text)) {
    add(`w:${word}`, 1);
    if (word.length > 5) for (let i = 0; i + 4 <= word.length; i++) add(`s:${word.slice(i, i + 4)}`, 0.25);
  }
  const vector = new Array<number>(dimensions).fill(0);
  for (const [feature, count] of counts) {
    const hash = fnv1a(feature);
    const sign = hash & 0x80000000 ? -1 : 1;
    vector[hash % dimensions]! += sign * (1 + Math.log(count + 1));
  }
  const norm = Math.hypot(...vector);
  return norm === 0 ? vector : vector.map((value) => value / norm);
}

/**
 * `atrium/echo-embedding`: the offline development embedding model (hashed words, no AI), so a
 * new installation can show hybrid search without a provider. Free; counts words as tokens.
 */
export function createEchoEmbeddingModel(): EmbeddingModelV3 {
  return {
    specificationVersion: 'v3',
    provider: 'atrium',
    modelId: 'echo-embedding',
    maxEmbeddingsPerCall: 2048,
    supportsParallelCalls: true,
    doEmbed: ({ values }) =>
      Promise.resolve({
        embeddings: values.map((value) => hashedEmbedding(value)),
        usage: { tokens: values.reduce((sum, value) => sum + embeddingWords(value).length, 0) },
        warnings: [],
      }),
  };
}
