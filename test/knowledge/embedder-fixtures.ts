import type { ResolvedEmbeddingModel } from '../../src/models/registry.js';
import { hashedEmbedding } from '../../src/models/echo-embedding.js';
import type { VectorSupport } from '../../src/knowledge/vector-store.js';
import { KnowledgeVectors } from '../../src/knowledge/vectors.js';
import { engineName } from '../helpers/app.js';

/**
 * Storing vectors needs no extension (a blob on SQLite, `real[]` on PostgreSQL); only searching
 * them does. Said available here, the embedder runs on a PostgreSQL without pgvector as well.
 */
export class StoringVectors extends KnowledgeVectors {
  override support(): Promise<VectorSupport> {
    return Promise.resolve(
      engineName === 'sqlite'
        ? { available: true, engine: 'sqlite' }
        : { available: true, engine: 'postgres', schema: 'public' },
    );
  }
}

/** A provider call held open until the test answers it (or the caller aborts it). */
export interface HeldCall {
  texts: string[];
  signal: AbortSignal;
  /** Answers with hashed vectors, as the provider would. */
  answer(): void;
}

/**
 * Vectors whose provider calls wait for the test: a call takes exactly as long as the test
 * says, and a call nobody answers is a process that never hears back from its provider.
 */
export class HeldVectors extends StoringVectors {
  readonly calls: HeldCall[] = [];

  override embed(
    _workspaceId: string,
    _model: ResolvedEmbeddingModel,
    values: string[],
    abortSignal: AbortSignal,
  ): Promise<number[][]> {
    return new Promise((resolve, reject) => {
      abortSignal.addEventListener('abort', () => reject(abortSignal.reason), { once: true });
      this.calls.push({
        texts: values,
        signal: abortSignal,
        answer: () => resolve(values.map((text) => hashedEmbedding(text, 8))),
      });
    });
  }
}

/** Moved to test/helpers/wait-until.ts; kept here for the embedder tests' imports. */
export { waitUntil } from '../helpers/wait-until.js';
