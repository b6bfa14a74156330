import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { renewWhileWorking } from '../lease-renewal.js';
import type { ResolvedEmbeddingModel } from '../models/registry.js';
import { assertWithinWorkspaceLimits } from '../services/usage.js';
import { timeoutSignal } from '../timeout-signal.js';
import { type ChunkToEmbed, chunksLackingVectors, deleteStaleVectors, storeVectors } from './vector-store.js';
import { EmbeddingFailure, embeddingFailureMessage, type KnowledgeVectors } from './vectors.js';

export interface EmbedderOptions {
  /** Names this process in leases. */
  processId: string;
  /** How long one provider call may take (the chat providers' upstream timeout). */
  requestTimeoutMs: number;
  /** How long a claim on a workspace lasts unless renewed; default `EMBEDDING_LEASE_MS`. */
  leaseMs?: number;
  now?: () => Date;
  /** Chunks per provider call (OpenAI takes up to 2,048 inputs; smaller calls fail smaller). */
  batchSize?: number;
  /** Characters per provider call at most (about 50,000 tokens), whatever the batch size. */
  maxBatchChars?: number;
  /** First wait after a failure; doubled with every failure in a row, up to `backoffMaxMs`. */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /** Wait between looks for work when there was none. */
  idleMs?: number;
  onError?: (error: unknown, workspaceId: string) => void;
}

/**
 * A workspace's lease, kept short and renewed every third of it while its batch is under way: a
 * process killed mid-call (SIGKILL, out of memory, a lost machine) holds the workspace this long
 * at most, not for a whole provider call (`requestTimeoutMs`, two minutes by default), while a
 * live process keeps it however long its call takes.
 */
export const EMBEDDING_LEASE_MS = 30_000;

const DEFAULTS = {
  leaseMs: EMBEDDING_LEASE_MS,
  batchSize: 64,
  maxBatchChars: 200_000,
  backoffBaseMs: 5_000,
  backoffMaxMs: 10 * 60_000,
  idleMs: 2_000,
};
/** One chunk's text sent at most (chunks are ~1,500 characters; providers cap an input at ~8k tokens). */
const MAX_INPUT_CHARS = 8_000;
/** Vectors of a former model removed per step: cleanup never holds the database long. */
const STALE_DELETE_BATCH = 1_000;

/** Why a call is abandoned when a renewal finds another process holding the workspace. */
const LEASE_LOST = 'the lease on the workspace was lost';

/**
 * Gives chunks their vectors, in the background, apart from indexing: a file is `indexed` (and
 * lexically searchable) once its chunks are in, whatever the embedding provider does. Each
 * workspace with an embedding model is worked on by one process at a time (a short lease in
 * `knowledge_embedding_state`, renewed while a batch is under way, so two processes never pay
 * the provider twice for one chunk); a failed call is retried with exponential backoff, and its
 * error is shown in the index summary until a call succeeds. Vectors of a former model are
 * removed in small batches.
 */
export class Embedder {
  private readonly options: Required<Omit<EmbedderOptions, 'onError'>> & Pick<EmbedderOptions, 'onError'>;
  private running: Promise<void> | undefined;
  private stopped = false;
  private wake: (() => void) | undefined;
  /** Provider calls in flight, aborted by a stop. */
  private readonly calls = new Set<AbortController>();
  /** Lease renewals of the batches under way, ended by a stop. */
  private readonly renewals = new Set<() => void>();

  constructor(
    private readonly vectors: KnowledgeVectors,
    options: EmbedderOptions,
  ) {
    this.options = { now: () => new Date(), ...DEFAULTS, ...options };
  }

  private get db(): Db {
    return this.vectors.db;
  }

  /** Runs steps until stopped: at once again after work, else after `idleMs`. */
  start(): void {
    if (this.running) return;
    this.stopped = false;
    this.running = (async () => {
      while (!this.stopped) {
        let worked = false;
        try {
          worked = await this.step();
        } catch (error) {
          this.options.onError?.(error, '');
        }
        if (!worked && !this.stopped) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, this.options.idleMs);
            this.wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
      }
    })();
  }

  /**
   * Stops after the step in progress. A provider call in flight is aborted rather than waited
   * for (it may take up to `requestTimeoutMs`, longer than a supervisor's grace period): its
   * batch is handed back unembedded, for this process's next start or another process.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const endRenewal of this.renewals) endRenewal();
    this.renewals.clear();
    for (const call of this.calls) call.abort(new Error('the embedder stopped'));
    this.wake?.();
    await this.running;
    this.running = undefined;
  }

  /**
   * One round over the workspaces: a batch of chunks embedded for each that has some lacking a
   * vector (and whose backoff has passed), stale vectors cleaned up. Returns whether anything
   * was done, so a caller can run it until the work is out.
   */
  async step(): Promise<boolean> {
    const support = await this.vectors.support();
    // Without vector search, vectors would only cost provider tokens.
    if (!support.available) return false;
    const workspaces = await this.db
      .selectFrom('workspaces')
      .leftJoin('knowledge_embedding_state as s', 's.workspace_id', 'workspaces.id')
      .select(['workspaces.id', 'workspaces.embedding_model', 's.model_key'])
      .where((eb) =>
        eb.or([eb('workspaces.embedding_model', 'is not', null), eb('s.model_key', 'is not', null)]),
      )
      .orderBy('workspaces.id')
      .execute();
    let worked = false;
    for (const workspace of workspaces) {
      if (this.stopped) break;
      try {
        if (workspace.embedding_model) {
          if (await this.embedWorkspace(workspace.id, workspace.embedding_model)) worked = true;
        } else if (await this.forgetWorkspace(workspace.id)) {
          worked = true;
        }
      } catch (error) {
        this.options.onError?.(error, workspace.id);
      }
    }
    return worked;
  }

  /** Steps until a step finds nothing to do (tests, benchmarks, a CLI). */
  async runUntilIdle(maxSteps = 10_000): Promise<void> {
    for (let i = 0; i < maxSteps; i++) if (!(await this.step())) return;
  }

  /** The workspace names no embedding model any more: its vectors go, then its state row. */
  private async forgetWorkspace(workspaceId: string): Promise<boolean> {
    const deleted = await deleteStaleVectors(this.db, workspaceId, null, STALE_DELETE_BATCH);
    if (deleted === 0) {
      await this.db
        .deleteFrom('knowledge_embedding_state')
        .where('workspace_id', '=', workspaceId)
        .where('lease_until', 'is', null)
        .execute();
    }
    return deleted > 0;
  }

  private async embedWorkspace(workspaceId: string, modelId: string): Promise<boolean> {
    const now = this.options.now();
    let model: ResolvedEmbeddingModel;
    try {
      model = await this.vectors.models.resolveEmbedding(this.db, modelId);
    } catch (error) {
      await this.recordFailure(workspaceId, `${modelId}|unresolved`, error, now, false);
      return false;
    }
    if (!(await this.claim(workspaceId, model.key, now))) return false;
    // One per call, not one for the embedder's life: a combined signal stays tied to its inputs.
    const call = new AbortController();
    const stopRenewing = this.keepLease(workspaceId, call);
    try {
      const chunks = await this.nextBatch(workspaceId, model.key);
      if (chunks.length === 0) {
        const deleted = await deleteStaleVectors(this.db, workspaceId, model.key, STALE_DELETE_BATCH);
        await this.release(workspaceId, { succeeded: true });
        return deleted > 0;
      }
      const workspace = await this.db
        .selectFrom('workspaces')
        .select(['id', 'monthly_tokens', 'monthly_cost_usd'])
        .where('id', '=', workspaceId)
        .executeTakeFirstOrThrow();
      // Embeddings spend the workspace's tokens too: none past its monthly limits.
      await assertWithinWorkspaceLimits(this.db, workspace, now);
      this.calls.add(call);
      if (this.stopped) call.abort(new Error('the embedder stopped'));
      let embeddings: number[][];
      const within = timeoutSignal(this.options.requestTimeoutMs, call.signal);
      try {
        embeddings = await this.vectors.embed(workspaceId, model, chunks.map(embeddingInput), within.signal);
      } finally {
        within.clear();
        this.calls.delete(call);
      }
      if (embeddings.length !== chunks.length) {
        throw new EmbeddingFailure(
          `the provider returned ${embeddings.length} embeddings for ${chunks.length} texts`,
        );
      }
      // A lease lost meanwhile (another process took the workspace) stores nothing: that
      // process embeds these chunks itself. The answer's tokens were spent all the same.
      return await this.storeAndRelease(
        workspaceId,
        model.key,
        chunks.map((chunk, i) => ({ chunk, vector: embeddings[i]! })),
      );
    } catch (error) {
      if (call.signal.aborted) {
        // Stopped mid-call, or the lease lost, which is no fault of the provider: no failure
        // counted, no backoff. The chunks still lack their vectors (none are stored from a call
        // that did not answer, nor are its tokens counted), so whoever claims the workspace
        // next embeds them. A lost lease is not ours to let go: the release changes nothing.
        await this.release(workspaceId, { succeeded: false });
        return false;
      }
      await this.recordFailure(workspaceId, model.key, error, now, true);
      this.options.onError?.(error, workspaceId);
      return false;
    } finally {
      stopRenewing();
    }
  }

  /**
   * Renews the workspace's lease every third of `leaseMs` until the returned function is called
   * (or the embedder stops). A renewal that finds the lease held by another process (this one
   * stalled past it) aborts `call`: its answer is abandoned. A renewal that fails (the database
   * unreachable) is reported and the next one tries again; the store checks the lease anyway.
   */
  private keepLease(workspaceId: string, call: AbortController): () => void {
    const stop = renewWhileWorking({
      everyMs: Math.floor(this.options.leaseMs / 3),
      renew: async () => {
        const leaseUntil = new Date(this.options.now().getTime() + this.options.leaseMs).toISOString();
        const result = await this.db
          .updateTable('knowledge_embedding_state')
          .set({ lease_until: leaseUntil })
          .where('workspace_id', '=', workspaceId)
          .where('lease_owner', '=', this.options.processId)
          .executeTakeFirst();
        return Number(result.numUpdatedRows) > 0;
      },
      onLost: () => call.abort(new Error(LEASE_LOST)),
      onError: (error) => this.options.onError?.(error, workspaceId),
    });
    this.renewals.add(stop);
    return () => {
      stop();
      this.renewals.delete(stop);
    };
  }

  /**
   * Stores the batch's vectors and lets the lease go as a success, in one transaction, only
   * while the lease is still this process's: false (nothing stored) when it was lost. The
   * lease row is updated first, so on PostgreSQL its row lock keeps another process from
   * claiming the workspace until the vectors are in.
   */
  private async storeAndRelease(
    workspaceId: string,
    modelKey: string,
    items: { chunk: ChunkToEmbed; vector: number[] }[],
  ): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const released = await trx
        .updateTable('knowledge_embedding_state')
        .set({
          lease_owner: null,
          lease_until: null,
          failures: 0,
          last_error: null,
          next_attempt_at: null,
          updated_at: this.options.now().toISOString(),
        })
        .where('workspace_id', '=', workspaceId)
        .where('lease_owner', '=', this.options.processId)
        .executeTakeFirst();
      if (Number(released.numUpdatedRows) === 0) return false;
      await storeVectors(trx, modelKey, items);
      return true;
    });
  }

  /** Up to `batchSize` chunks lacking a vector, cut to `maxBatchChars` (at least one). */
  private async nextBatch(workspaceId: string, modelKey: string): Promise<ChunkToEmbed[]> {
    const chunks = await chunksLackingVectors(this.db, workspaceId, modelKey, this.options.batchSize);
    let chars = 0;
    const batch: ChunkToEmbed[] = [];
    for (const chunk of chunks) {
      chars += Math.min(embeddingInput(chunk).length, MAX_INPUT_CHARS);
      if (batch.length > 0 && chars > this.options.maxBatchChars) break;
      batch.push(chunk);
    }
    return batch;
  }

  /**
   * Takes the workspace's lease when it is free (or lapsed, or ours) and its backoff has passed.
   * A changed model starts afresh: no backoff, no error of the former model.
   */
  private async claim(workspaceId: string, modelKey: string, now: Date): Promise<boolean> {
    const at = now.toISOString();
    await this.db
      .insertInto('knowledge_embedding_state')
      .values({ workspace_id: workspaceId, model_key: modelKey, failures: 0, updated_at: at })
      .onConflict((oc) => oc.column('workspace_id').doNothing())
      .execute();
    const leaseUntil = new Date(now.getTime() + this.options.leaseMs).toISOString();
    const changed = sql<boolean>`model_key <> ${modelKey}`;
    const result = await this.db
      .updateTable('knowledge_embedding_state')
      .set({
        lease_owner: this.options.processId,
        lease_until: leaseUntil,
        model_key: modelKey,
        failures: sql`case when ${changed} then 0 else failures end`,
        last_error: sql`case when ${changed} then null else last_error end`,
        next_attempt_at: sql`case when ${changed} then null else next_attempt_at end`,
        updated_at: at,
      })
      .where('workspace_id', '=', workspaceId)
      .where((eb) =>
        eb.or([
          eb('lease_until', 'is', null),
          eb('lease_until', '<', at),
          eb('lease_owner', '=', this.options.processId),
        ]),
      )
      .where((eb) =>
        eb.or([
          eb('next_attempt_at', 'is', null),
          eb('next_attempt_at', '<=', at),
          eb('model_key', '<>', modelKey),
        ]),
      )
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Lets the lease go; a success also ends the backoff and clears the last error. */
  private async release(workspaceId: string, outcome: { succeeded: boolean }): Promise<void> {
    await this.db
      .updateTable('knowledge_embedding_state')
      .set({
        lease_owner: null,
        lease_until: null,
        ...(outcome.succeeded && { failures: 0, last_error: null, next_attempt_at: null }),
        updated_at: this.options.now().toISOString(),
      })
      .where('workspace_id', '=', workspaceId)
      .where('lease_owner', '=', this.options.processId)
      .execute();
  }

  /** Counts a failure, sets the next attempt after the backoff, and lets the lease go. */
  private async recordFailure(
    workspaceId: string,
    modelKey: string,
    error: unknown,
    now: Date,
    leased: boolean,
  ): Promise<void> {
    const state = await this.db
      .selectFrom('knowledge_embedding_state')
      .select(['failures', 'model_key'])
      .where('workspace_id', '=', workspaceId)
      .executeTakeFirst();
    const failures = (state?.model_key === modelKey ? state.failures : 0) + 1;
    const wait = Math.min(this.options.backoffBaseMs * 2 ** (failures - 1), this.options.backoffMaxMs);
    const values = {
      model_key: modelKey,
      failures,
      last_error: embeddingFailureMessage(error, this.options.requestTimeoutMs),
      next_attempt_at: new Date(now.getTime() + wait).toISOString(),
      lease_owner: null,
      lease_until: null,
      updated_at: now.toISOString(),
    };
    if (!state) {
      await this.db
        .insertInto('knowledge_embedding_state')
        .values({ workspace_id: workspaceId, ...values })
        .onConflict((oc) => oc.column('workspace_id').doNothing())
        .execute();
      return;
    }
    let update = this.db
      .updateTable('knowledge_embedding_state')
      .set(values)
      .where('workspace_id', '=', workspaceId);
    if (leased) update = update.where('lease_owner', '=', this.options.processId);
    await update.execute();
  }
}

/** What is embedded of a chunk: its heading path gives the passage its context. */
function embeddingInput(chunk: ChunkToEmbed): string {
  const text = chunk.heading ? `${chunk.heading}\n\n${chunk.text}` : chunk.text;
  return text.slice(0, MAX_INPUT_CHARS);
}
