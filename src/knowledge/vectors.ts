import {
  APICallError,
  EmptyResponseBodyError,
  embedMany,
  InvalidResponseDataError,
  JSONParseError,
  RetryError,
  TypeValidationError,
} from 'ai';
import type { Db } from '../db/database.js';
import { addDailyUsage, addMonthUsage } from '../db/repositories/usage.js';
import { ApiError } from '../errors.js';
import { costUsd, type ModelRegistry, type ResolvedEmbeddingModel } from '../models/registry.js';
import { assertWithinWorkspaceLimits, ledgerMonth } from '../services/usage.js';
import { reciprocalRankFusion } from './fusion.js';
import {
  countChunksLackingVectors,
  detectVectorSupport,
  nearestChunks,
  projectHasVectors,
  type VectorSupport,
} from './vector-store.js';

/** `GET /v1/projects/{id}/index`'s `vectors` (knowledge.md). */
export type VectorsState = 'ready' | 'building' | 'off' | 'unavailable';

export interface VectorSummary {
  embeddingModel: string | null;
  vectors: VectorsState;
  /** Why the last embedding attempt failed, while vectors are not ready; else null. */
  vectorsError: string | null;
}

export interface KnowledgeVectorsOptions {
  now?: () => Date;
  /** How long a search waits for its query's embedding before it answers lexically. */
  queryTimeoutMs?: number;
  /** How long a query's embedding is reused. */
  queryCacheMs?: number;
}

/** Query embeddings kept in memory: a few hundred recent questions. */
const QUERY_CACHE_ENTRIES = 500;
const DEFAULT_QUERY_TIMEOUT_MS = 2_000;
const DEFAULT_QUERY_CACHE_MS = 5 * 60_000;
/** Provider messages are shown in the index summary; long ones are cut. */
const MAX_ERROR_CHARS = 300;

export function shortError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.length > MAX_ERROR_CHARS ? `${message.slice(0, MAX_ERROR_CHARS)}…` : message;
}

/** Why vectors are `unavailable` while the database fails the check (its error is not shown). */
const VECTOR_CHECK_FAILED = 'the database failed the check for vector support; it is checked again';

/** A failure of embedding told in Atrium's own words: the index summary shows its message. */
export class EmbeddingFailure extends Error {}

/** `vectorsError` of a failure that is neither the provider's nor told in Atrium's words. */
export const INTERNAL_EMBEDDING_FAILURE = 'embedding failed on an internal error; it will be tried again';

/**
 * What the index summary's `vectorsError` shows of a failed embedding call. Every key of the
 * workspace reads it, so, as a chat's 502 does, it holds Atrium's words: the provider's HTTP
 * status but not its message (which may quote the provider key), never a network error's hosts
 * and ports, nor a database's message. The error itself goes to the service log.
 */
export function embeddingFailureMessage(error: unknown, timeoutMs: number): string {
  if (error instanceof ApiError || error instanceof EmbeddingFailure) return shortError(error);
  const last = RetryError.isInstance(error) ? error.lastError : error;
  // The embedder's own aborts (a stop, a lost lease) are no failure: only its time limit is left.
  if (last instanceof Error && (last.name === 'TimeoutError' || last.name === 'AbortError')) {
    return `the embedding provider did not answer within ${timeoutMs} ms`;
  }
  if (APICallError.isInstance(last)) {
    if (last.statusCode === undefined) return 'the embedding provider could not be reached';
    if (last.statusCode >= 400) return `the embedding provider answered HTTP ${last.statusCode}`;
  }
  if (
    APICallError.isInstance(last) ||
    InvalidResponseDataError.isInstance(last) ||
    TypeValidationError.isInstance(last) ||
    JSONParseError.isInstance(last) ||
    EmptyResponseBodyError.isInstance(last)
  ) {
    return 'the embedding provider answered something other than embeddings';
  }
  return INTERNAL_EMBEDDING_FAILURE;
}

/** A chunk as search returns it (the shape of the lexical candidates). */
export interface ChunkCandidate {
  file_id: string;
  path: string;
  name: string;
  text: string;
  heading: string | null;
  pages: string | null;
  score: number;
}

/**
 * The vector side of project knowledge for one database: whether it can search vectors, each
 * workspace's embedding model, embedding text and queries through the model providers (with
 * usage counted in the workspace's ledger), and hybrid search. One per app; search finds it by
 * its database (`attachKnowledgeVectors`), so lexical search keeps its signature.
 */
export class KnowledgeVectors {
  private supportPromise: Promise<VectorSupport> | undefined;
  private readonly queryCache = new Map<string, { at: number; vector: Promise<number[]> }>();
  private readonly now: () => Date;
  private readonly queryTimeoutMs: number;
  private readonly queryCacheMs: number;

  constructor(
    readonly db: Db,
    readonly models: ModelRegistry,
    options: KnowledgeVectorsOptions = {},
  ) {
    this.now = options.now ?? (() => new Date());
    this.queryTimeoutMs = options.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS;
    this.queryCacheMs = options.queryCacheMs ?? DEFAULT_QUERY_CACHE_MS;
  }

  /**
   * Detected once per process (an extension does not come or go while it runs). A database that
   * failed the check (a connection lost) says nothing of the extension: that answer is not kept,
   * and the next call checks again, or vectors would stay off until a restart.
   */
  support(): Promise<VectorSupport> {
    this.supportPromise ??= detectVectorSupport(this.db).catch((): VectorSupport => {
      this.supportPromise = undefined;
      return { available: false, reason: VECTOR_CHECK_FAILED };
    });
    return this.supportPromise;
  }

  /** The workspace's embedding model, resolved, or null when it names none. */
  async workspaceModel(workspaceId: string): Promise<ResolvedEmbeddingModel | null> {
    const row = await this.db
      .selectFrom('workspaces')
      .select('embedding_model')
      .where('id', '=', workspaceId)
      .executeTakeFirst();
    if (!row?.embedding_model) return null;
    return this.models.resolveEmbedding(this.db, row.embedding_model);
  }

  /**
   * Embeds texts in one provider call (callers keep batches within the provider's size limits),
   * and counts the tokens in the workspace's usage: its monthly ledger (so they count against
   * `monthlyTokens` and `monthlyCostUsd`) and the usage report, under the model, with no agent.
   */
  async embed(
    workspaceId: string,
    model: ResolvedEmbeddingModel,
    values: string[],
    abortSignal: AbortSignal,
  ): Promise<number[][]> {
    const { embeddings, usage } = await embedMany({ model: model.model, values, maxRetries: 0, abortSignal });
    const tokens = usage.tokens ?? 0;
    if (tokens > 0) {
      const at = this.now();
      const cost = costUsd(model.pricing, tokens, 0);
      await this.db.transaction().execute(async (trx) => {
        await addMonthUsage(
          trx,
          workspaceId,
          ledgerMonth(at),
          { inputTokens: tokens, outputTokens: 0, costUsd: cost },
          at.toISOString(),
        );
        await addDailyUsage(trx, {
          workspaceId,
          date: at.toISOString().slice(0, 10),
          agentId: '',
          model: model.id,
          inputTokens: tokens,
          outputTokens: 0,
          costUsd: cost,
        });
      });
    }
    return embeddings;
  }

  /**
   * A query's embedding: from the cache when asked recently (the same question repeats within a
   * chat), else one provider call bounded by the query time limit. Concurrent searches of the
   * same query share one call; a failed call is not cached. A vector is reused only under the
   * provider settings it came from (`providerConfig`): after a setup file changes the provider's
   * base URL or key, the next search asks the new provider.
   */
  embedQuery(workspaceId: string, model: ResolvedEmbeddingModel, query: string): Promise<number[]> {
    const key = `${workspaceId}\u0000${model.key}\u0000${model.providerConfig}\u0000${query}`;
    const at = Date.now();
    const cached = this.queryCache.get(key);
    if (cached && at - cached.at < this.queryCacheMs) return cached.vector;
    // A query's embedding spends the workspace's tokens too: none past its monthly limits (the
    // search then answers lexically).
    const vector = this.assertWithinLimits(workspaceId)
      .then(() => this.embed(workspaceId, model, [query], AbortSignal.timeout(this.queryTimeoutMs)))
      .then(([first]) => {
        if (!first) throw new Error('the provider returned no embedding');
        return first;
      });
    vector.catch(() => this.queryCache.delete(key));
    this.queryCache.delete(key);
    if (this.queryCache.size >= QUERY_CACHE_ENTRIES)
      this.queryCache.delete(this.queryCache.keys().next().value!);
    this.queryCache.set(key, { at, vector });
    return vector;
  }

  private async assertWithinLimits(workspaceId: string): Promise<void> {
    const workspace = await this.db
      .selectFrom('workspaces')
      .select(['id', 'monthly_tokens', 'monthly_cost_usd'])
      .where('id', '=', workspaceId)
      .executeTakeFirstOrThrow();
    await assertWithinWorkspaceLimits(this.db, workspace, this.now());
  }

  /** The `vectors` and `embeddingModel` of a project's index summary. */
  async summary(workspaceId: string, projectId: string): Promise<VectorSummary> {
    const row = await this.db
      .selectFrom('workspaces')
      .leftJoin('knowledge_embedding_state as s', 's.workspace_id', 'workspaces.id')
      .select(['workspaces.embedding_model', 's.last_error', 's.model_key'])
      .where('workspaces.id', '=', workspaceId)
      .executeTakeFirst();
    const embeddingModel = row?.embedding_model ?? null;
    if (!embeddingModel) return { embeddingModel, vectors: 'off', vectorsError: null };
    const support = await this.support();
    if (!support.available) return { embeddingModel, vectors: 'unavailable', vectorsError: support.reason };
    let model: ResolvedEmbeddingModel;
    try {
      model = await this.models.resolveEmbedding(this.db, embeddingModel);
    } catch (error) {
      return {
        embeddingModel,
        vectors: 'building',
        vectorsError: embeddingFailureMessage(error, this.queryTimeoutMs),
      };
    }
    const lacking = await countChunksLackingVectors(this.db, projectId, model.key);
    if (lacking === 0) return { embeddingModel, vectors: 'ready', vectorsError: null };
    const error = row?.model_key === model.key ? (row.last_error ?? null) : null;
    return { embeddingModel, vectors: 'building', vectorsError: error };
  }

  /**
   * The project's chunks nearest to the query, as search candidates, or null when there is no
   * vector search to do: no embedding model, no vector support, no vectors yet, or a provider
   * that failed or was slow (search then answers lexically). Chunks not embedded yet are
   * missing here but not from the lexical list, so a model being changed or built never hides
   * a document.
   */
  async vectorCandidates(
    params: { projectId: string; workspaceId?: string; query: string },
    limit: number,
  ): Promise<ChunkCandidate[] | null> {
    const support = await this.support();
    if (!support.available) return null;
    const workspaceId = params.workspaceId ?? (await this.projectWorkspace(params.projectId));
    if (!workspaceId) return null;
    let model: ResolvedEmbeddingModel | null;
    try {
      model = await this.workspaceModel(workspaceId);
    } catch {
      return null;
    }
    if (!model || !(await projectHasVectors(this.db, params.projectId, model.key))) return null;
    let vector: number[];
    try {
      vector = await this.embedQuery(workspaceId, model, params.query);
    } catch {
      return null;
    }
    let hits;
    try {
      hits = await nearestChunks(this.db, support, {
        projectId: params.projectId,
        modelKey: model.key,
        vector,
        limit,
      });
    } catch {
      // A vector of another length than the stored ones (a provider changed its model behind
      // the same name) cannot be compared: lexical results only.
      return null;
    }
    if (hits.length === 0) return [];
    const rows = await this.db
      .selectFrom('knowledge_chunks as c')
      .innerJoin('project_files as f', 'f.id', 'c.file_id')
      .select(['c.id', 'c.file_id', 'f.path', 'f.name', 'c.text', 'c.heading', 'c.pages'])
      .where('c.project_id', '=', params.projectId)
      .where(
        'c.id',
        'in',
        hits.map((hit) => hit.chunkId),
      )
      .execute();
    const byId = new Map(rows.map((row) => [Number(row.id), row]));
    return hits.flatMap((hit) => {
      const row = byId.get(hit.chunkId);
      if (!row) return [];
      const { id: _id, ...rest } = row;
      return [{ ...rest, score: 1 - hit.distance }];
    });
  }

  private async projectWorkspace(projectId: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('projects')
      .select('workspace_id')
      .where('id', '=', projectId)
      .executeTakeFirst();
    return row?.workspace_id;
  }
}

const attached = new WeakMap<object, KnowledgeVectors>();

/** Makes `vectors` the vector side of searches on its database (done once by the app). */
export function attachKnowledgeVectors(vectors: KnowledgeVectors): void {
  attached.set(vectors.db, vectors);
}

export function knowledgeVectorsOf(db: Db): KnowledgeVectors | undefined {
  return attached.get(db);
}

/**
 * Hybrid search's last step, called by lexical search with its candidates: when the project
 * has vectors under its workspace's model, the nearest chunks are merged in by reciprocal-rank
 * fusion (fusion.ts), and the fused score replaces the lexical one. Otherwise (or when the
 * provider fails) the lexical candidates come back as they are.
 */
export async function withVectorCandidates<T extends ChunkCandidate>(
  db: Db,
  params: { projectId: string; workspaceId?: string; query: string },
  lexical: T[],
  limit: number,
): Promise<ChunkCandidate[]> {
  const vectors = knowledgeVectorsOf(db);
  if (!vectors) return lexical;
  const nearest = await vectors.vectorCandidates(params, limit);
  if (!nearest || nearest.length === 0) return lexical;
  const key = (candidate: ChunkCandidate) => `${candidate.file_id}\u0000${candidate.text}`;
  const fused = reciprocalRankFusion<ChunkCandidate>([lexical, nearest], key);
  const ordered = keepLexicalHead(
    fused.map(({ item, score }) => ({ ...item, score })),
    lexical.map(key),
    key,
  );
  // A lexical result kept ahead of its fused place scores as the one it was put before, so
  // `score` never rises down the list (results are best first, higher is better).
  for (let i = ordered.length - 2; i >= 0; i--) {
    if (ordered[i]!.score < ordered[i + 1]!.score) ordered[i]!.score = ordered[i + 1]!.score;
  }
  return ordered;
}

/**
 * Fusion must not cost what lexical search found: a passage ranked first lexically (a rare
 * name, an error code) can sink below chunks that merely appear in both lists. So the lexical
 * result at rank r (from 0) is kept at position 2r + 1 at the latest: the lexical top 4 stay in
 * the top 8, and vectors fill the places around them.
 */
function keepLexicalHead<T>(fused: T[], lexicalKeys: string[], key: (item: T) => string): T[] {
  const byKey = new Map(fused.map((item) => [key(item), item]));
  const placed = new Set<string>();
  const out: T[] = [];
  let nextLexical = 0;
  let nextFused = 0;
  while (out.length < fused.length) {
    while (nextLexical < lexicalKeys.length && placed.has(lexicalKeys[nextLexical]!)) nextLexical++;
    let chosen: string;
    if (nextLexical < lexicalKeys.length && out.length >= 2 * nextLexical + 1) {
      chosen = lexicalKeys[nextLexical]!;
    } else {
      while (placed.has(key(fused[nextFused]!))) nextFused++;
      chosen = key(fused[nextFused]!);
    }
    placed.add(chosen);
    out.push(byKey.get(chosen)!);
  }
  return out;
}
