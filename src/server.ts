import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import type { DestinationStream } from 'pino';
import { buildApp } from './app.js';
import { type Config, MIN_SIGNING_SECRET_BYTES } from './config.js';
import { migrateToLatest, openDatabase } from './db/database.js';
import { newId, systemClock } from './ids.js';
import { Embedder } from './knowledge/embedder.js';
import { type Indexer, type IndexerDeps, startIndexer } from './knowledge/indexer.js';
import { KnowledgeVectors } from './knowledge/vectors.js';
import { ModelRegistry } from './models/registry.js';
import { type PeriodicTask, runPeriodically, sweepLeftovers } from './leftovers.js';
import { endLogWrites } from './logging/log-end.js';
import { projectStoragePrefix } from './services/project-files.js';
import { createObjectStore, httpOrigin } from './storage/index.js';
import type { StoreLog } from './storage/object-store.js';

/** What the server takes its stop signals from, and ends with after one: `process` itself. */
export interface StopSignals {
  once(signal: 'SIGTERM' | 'SIGINT', listener: () => void): unknown;
  removeListener(signal: 'SIGTERM' | 'SIGINT', listener: () => void): unknown;
  exit(code: number): void;
}

/**
 * The only place that listens: config → database → app → listen. SIGTERM and SIGINT stop
 * accepting connections, let in-flight requests finish, then close the database and log "stopped".
 * The returned `close()` does the same without ending the process; once a shutdown has ended,
 * its signal listeners are removed (tests start many servers in one process).
 */
export async function startServer(
  config: Config,
  hooks: {
    onListening?: (url: string) => void;
    /** Starts the file indexer in place of `startIndexer` (tests make its stop fail). */
    startIndexer?: (deps: IndexerDeps) => Indexer;
    /** In place of `process` (tests signal one server without ending the test run). */
    signals?: StopSignals;
    /**
     * The caller's own start-up work once the server listens (`atrium serve`: the demo of a
     * first start), begun only when no shutdown has begun by then. A shutdown aborts `stopping`
     * and waits for this work to end before its last line, so that the work can leave undone
     * what it has not done yet and print nothing after "stopped". It must not reject: a
     * rejection fails the shutdown.
     */
    onServing?: (address: string, stopping: AbortSignal) => Promise<void>;
    /** Where the log goes in place of stdout (tests read it). */
    logStream?: DestinationStream;
  } = {},
) {
  // Until the app's logger exists (migrations), a lost connection is replaced without a line.
  const appLog: { to?: FastifyBaseLogger } = {};
  const database = await openDatabase(config.database, {
    onConnectionLost: (error) =>
      appLog.to?.warn(
        { code: (error as { code?: string }).code },
        `a PostgreSQL connection was closed by the server (${error.message}); the pool opens another when needed`,
      ),
  });
  await migrateToLatest(database.db);
  // Built before the app, which the sweeps below share it with; it logs through the app's logger.
  const log: StoreLog = { warn: (details, message) => app.log.warn(details, message) };
  const store = createObjectStore(config, { log });
  const vectors = new KnowledgeVectors(database.db, new ModelRegistry(config));
  const app = await buildApp(
    { config, db: database.db, store, vectors },
    hooks.logStream ? { logStream: hooks.logStream } : {},
  );
  appLog.to = app.log;
  for (const warning of config.warnings) app.log.warn(warning);
  if (Buffer.byteLength(config.signingSecret) < MIN_SIGNING_SECRET_BYTES) {
    // The value itself is not logged: it is a secret.
    app.log.warn(
      `the signing secret is shorter than ${MIN_SIGNING_SECRET_BYTES} bytes: set ATRIUM_SIGNING_SECRET to a longer one (such as \`openssl rand -base64 32\`)`,
    );
  }

  // Started once listening, unless a shutdown has begun by then.
  const background: {
    sweeps?: PeriodicTask;
    indexer?: Indexer;
    embedder?: Embedder;
    /** The vector search check, with its log line. */
    vectorCheck?: Promise<void>;
    /** `hooks.onServing`. */
    startUp?: Promise<void>;
  } = {};
  const stopping = new AbortController();
  // The listen, settled either way. A signal can come while it is pending: Fastify's close()
  // then resolves at once, and the listen opens the port all the same once it ends. So the
  // shutdown first waits for the listen to settle, and startServer, seeing the shutdown begun
  // once the listen has ended, starts no background work: the shutdown has nothing to miss.
  let listened: Promise<unknown> = Promise.resolve();
  const signals = hooks.signals ?? process;
  const signalListeners: Array<['SIGTERM' | 'SIGINT', () => void]> = [];
  let closing: Promise<void> | undefined;
  // `quietly`: after a failed listen nothing was served, so the shutdown's lines ("finishing
  // in-flight requests", "stopped") would only mislead beside the command's own error line.
  const shutdown = (signal: string, { quietly = false } = {}) => {
    closing ??= (async () => {
      const started = performance.now();
      stopping.abort();
      if (!quietly) app.log.info({ signal }, 'shutting down: finishing in-flight requests');
      await listened;
      // Every part settles before the database closes, even when another has failed: requests in
      // flight finish (their replies stored), a sweep in progress ends (no new one starts), files
      // being indexed and chunks being embedded (the provider call aborted) are handed back for
      // another process (or the next start), and the vector search check does not run into the
      // closed database. The caller's start-up work (told to stop) ends too, so that nothing it
      // prints comes after the last line.
      const outcomes = await Promise.allSettled([
        background.startUp,
        background.sweeps?.stop(),
        background.indexer?.stop(),
        background.embedder?.stop(),
        background.vectorCheck,
        app.close(),
      ]);
      outcomes.push(...(await Promise.allSettled([database.close()])));
      const failures = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome] : []));
      if (failures.length > 0) {
        // The first failure fails the shutdown ("shutdown failed", the last line); the others
        // would be lost without a line of their own.
        for (const { reason } of failures.slice(1)) {
          app.log.error({ err: reason }, 'shutdown: another part failed too');
        }
        throw failures[0]!.reason;
      }
      // The last line of a clean stop (a failed one logs "shutdown failed" instead), so that a
      // log shows the process ended on its own rather than being killed.
      if (!quietly) app.log.info({ signal, shutdownMs: Math.round(performance.now() - started) }, 'stopped');
    })().finally(() => {
      // Not at its start: a signal during a shutdown begun by close() still ends the process
      // once that shutdown is over, as before.
      for (const [signal, listener] of signalListeners) signals.removeListener(signal, listener);
    });
    return closing;
  };
  const close = () => shutdown('close');
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    const listener = () => {
      shutdown(signal)
        .then(
          () => 0,
          (error) => {
            app.log.error({ err: error }, 'shutdown failed');
            return 1;
          },
        )
        .then(async (code) => {
          // Else exiting could drop the last line ("stopped", or the failure) while it is written.
          await endLogWrites(app.log);
          signals.exit(code);
        });
    };
    signalListeners.push([signal, listener]);
    signals.once(signal, listener);
  }

  let address: string;
  try {
    const listen = app.listen({ port: config.port, host: config.host });
    listened = listen.catch(() => undefined);
    address = await listen;
  } catch (error) {
    // A port in use or not allowed: nothing is served, so nothing may stay open either (a
    // process holding its database and timers would look alive to a supervisor).
    await shutdown('listen failed', { quietly: true }).catch(() => undefined);
    throw error;
  }
  // A signal came while listening began: the shutdown under way closes the server, and nothing
  // below may start on the database it closes.
  if (closing) return { app, address, close };
  // PORT=0 picks a free port: signed URLs name the one really chosen.
  store.setServerOrigin(httpOrigin(config.host, (app.server.address() as AddressInfo).port));
  hooks.onListening?.(address);
  background.startUp = hooks.onServing?.(address, stopping.signal);
  // In the background, at start and then periodically: the service answers while storage is
  // looked through for what a crashed process left behind.
  background.sweeps = runPeriodically(
    async () => {
      const swept = await sweepLeftovers({
        db: database.db,
        store,
        clock: systemClock,
        dataDir: config.dataDir,
        log,
      });
      if (swept.tempFiles + swept.skillSpools + swept.orphanSkills + swept.orphanProjects > 0) {
        app.log.info(swept, 'removed leftovers of interrupted uploads');
      }
    },
    config.sweepIntervalMs,
    (error) => app.log.warn({ err: error }, 'could not sweep leftovers of interrupted uploads'),
  );
  // Project files marked for indexing by sync, in this process or any other (docs/knowledge.md).
  background.indexer = (hooks.startIndexer ?? startIndexer)({
    db: database.db,
    store,
    config: config.indexing,
    storageKey: (file) => projectStoragePrefix(file.workspace_id, file.project_id) + file.path,
    log: app.log,
  });
  // Chunks get vectors apart from indexing, so an embedding provider never holds up a file.
  background.embedder = new Embedder(vectors, {
    processId: newId('prc'),
    requestTimeoutMs: config.upstreamTimeoutMs,
    onError: (error, workspaceId) =>
      app.log.warn({ err: error, workspaceId }, 'could not embed project chunks; retrying later'),
  });
  background.embedder.start();
  background.vectorCheck = vectors.support().then((support) => {
    if (!support.available)
      app.log.info({ reason: support.reason }, 'vector search unavailable: search is lexical');
  });
  return { app, address, close };
}
