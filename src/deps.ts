import type { Config } from './config.js';
import type { Coordination } from './coordination/coordination.js';
import type { RateLimitCounter } from './coordination/rate-limit-counter.js';
import type { RedisClient } from './coordination/redis.js';
import type { Db } from './db/database.js';
import type { KnowledgeVectors } from './knowledge/vectors.js';
import type { Clock } from './ids.js';
import type { ModelRegistry } from './models/registry.js';
import type { FileDownloader } from './services/file-downloads.js';
import type { UsageReservations } from './services/usage-reservations.js';
import type { ObjectStore } from './storage/object-store.js';

/** Everything the app needs from outside, built once by the caller (server, CLI or test). */
export interface AppDeps {
  config: Config;
  db: Db;
  clock: Clock;
  /** Object storage (fs or s3), built from config by createObjectStore unless given. */
  store: ObjectStore;
  /** Model providers and the models registry, built from config unless given. */
  models: ModelRegistry;
  /** Embeddings and vector search of project knowledge (built unless given; serve also embeds). */
  vectors: KnowledgeVectors;
  /** How long an agent's MCP server may take to connect before it becomes a warning. */
  mcpConnectTimeoutMs?: number;
  /** How file parts' URLs are fetched for models that cannot read them (defaultFileDownloader). */
  fileDownloader?: FileDownloader;
  /**
   * Extra readiness checks beyond the database (e.g. storage), by name. A check resolves when
   * ready; resolves `'unavailable'` for an expected state worth no warning (shutting down: one
   * per probe of the drain); rejects on a failure, which `/readyz` logs at warn.
   */
  readinessChecks?: Record<string, () => Promise<void | 'unavailable'>>;
  /** The process's Redis connection when REDIS_URL is set (built from config unless given). */
  redis?: RedisClient;
  /** Where per-key request counts are shared: Redis when configured, else the database. */
  rateLimitCounter: RateLimitCounter;
  /** Usage promised to model requests in flight, counted against usage limits. */
  usageReservations: UsageReservations;
  /** Live state shared between processes (Redis), built from config unless given. */
  coordination?: Coordination;
  /** How long shutdown lets replies in progress run on; default 15 s (docs/chat.md). */
  shutdownWaitMs?: number;
  /** How long a stop waits for the stopped reply to be stored; default 10 s (docs/chat.md). */
  stopWaitMs?: number;
}
