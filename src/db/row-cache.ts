import type { Db, Executor } from './database.js';
import { ExactCache, readByCaches } from './exact-cache.js';

/**
 * Rows that every reply reads and hardly anything writes (the agent with its workspace, the
 * model's registry entry, the key owner), kept in memory exactly (src/db/exact-cache.ts): any
 * write to the tables it `read`s (or to workspaces and organizations, whose deletes cascade into every row),
 * here, in another process or by the CLI, makes the next lookup read the database. A row not
 * found is not kept. Reads inside a transaction go to the database. Kept rows are shared between
 * requests: callers must not change them.
 */
export function rowCache<Row extends object>(read: readonly string[]) {
  const tables = readByCaches([...read, ...OWNERS]);
  const caches = new WeakMap<Db, ExactCache<Row> | null>();
  /** `version`: the data_version the request read at authentication (ExactCache.get). */
  return async (
    db: Executor,
    key: string,
    load: () => Promise<Row | undefined>,
    version?: number,
  ): Promise<Row | undefined> => {
    if (db.isTransaction) return load();
    let cache = caches.get(db as Db);
    if (cache === undefined) {
      cache = ExactCache.for<Row>(db as Db, tables, LIMITS) ?? null;
      caches.set(db as Db, cache);
    }
    return cache ? cache.get(key, load, version) : load();
  };
}

const OWNERS = ['workspaces', 'organizations'];

/** Far more agents, models or users than a process answers for at once; past it the cache starts over. */
const LIMITS = { entries: 10_000 };
