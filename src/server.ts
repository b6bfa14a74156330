import type { AddressInfo } from 'node:net';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { migrateToLatest, openDatabase } from './db/database.js';
import { sweepOrphanSkillObjects } from './services/skills.js';
import { FsObjectStore } from './storage/fs-store.js';
import { createObjectStore, httpOrigin } from './storage/index.js';

/**
 * The only place that listens: config → database → app → listen. SIGTERM and SIGINT stop
 * accepting connections, let in-flight requests finish, then close the database.
 */
export async function startServer(config: Config, hooks: { onListening?: (url: string) => void } = {}) {
  const database = await openDatabase(config.database);
  await migrateToLatest(database.db);
  const store = createObjectStore(config);
  const app = await buildApp({ config, db: database.db, dialect: database.dialect, store });

  let closing: Promise<void> | undefined;
  const shutdown = (signal: string) => {
    closing ??= (async () => {
      app.log.info({ signal }, 'shutting down: finishing in-flight requests');
      try {
        await app.close();
      } finally {
        await database.close();
      }
    })();
    return closing;
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      shutdown(signal).then(
        () => process.exit(0),
        (error) => {
          app.log.error({ err: error }, 'shutdown failed');
          process.exit(1);
        },
      );
    });
  }

  const address = await app.listen({ port: config.port, host: config.host });
  if (config.port === 0 && store instanceof FsObjectStore) {
    // PORT=0 picks a free port: signed URLs name the one really chosen.
    store.setFallbackOrigin(httpOrigin(config.host, (app.server.address() as AddressInfo).port));
  }
  hooks.onListening?.(address);
  // In the background: the service answers while storage is looked through.
  sweepOrphanSkillObjects(database.db, store, new Date()).then(
    (removed) => {
      if (removed > 0) app.log.info({ removed }, 'removed the files of skills that have no record');
    },
    (error: unknown) => app.log.warn({ err: error }, 'could not look for files of skills without a record'),
  );
  return { app, address, close: () => shutdown('close') };
}
