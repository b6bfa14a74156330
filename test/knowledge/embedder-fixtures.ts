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

/**
 * A setup file of one organization, user, workspace and project (ids `org_<tag>`, `usr_<tag>`,
 * `wsp_<tag>`, `prj_<tag>`) whose embedding model `embed-<tag>` runs on the openai-compatible
 * provider `emb` at `baseURL`.
 */
export function embeddingWorkspaceSetup(
  tag: string,
  options: { baseURL: string; apiKey?: string; providerModel?: string; inputPerMTok?: number },
): string {
  const pricing =
    options.inputPerMTok === undefined ? '' : `, pricing: { inputPerMTok: ${options.inputPerMTok} }`;
  return `
providers:
  - { id: emb, type: openai-compatible, baseURL: "${options.baseURL}", apiKey: ${options.apiKey ?? 'fake-key'} }
models:
  - { id: embed-${tag}, provider: emb, model: ${options.providerModel ?? 'hash-64'}, kind: embedding${pricing} }
organizations:
  - id: org_${tag}
    name: Embeddings ${tag}
    users: [{ id: usr_${tag}, name: U, email: ${tag}@embeddings.test }]
    workspaces:
      - id: wsp_${tag}
        name: W
        members: [{ user: usr_${tag}, role: owner }]
        embeddingModel: embed-${tag}
        projects:
          - { id: prj_${tag}, name: Knowledge }
`;
}
