import type { Db } from './database.js';
import { ExactCache, readByCaches } from './exact-cache.js';

/** What a listing keeps: its response body's bytes, or its page with what else the statement returned. */
type ListingAnswer = Buffer | { page: string };

/**
 * Pages of a listing kept in memory, exactly (src/db/exact-cache.ts): a listing asked again
 * while nothing it reads from changed is answered without reading, on every process, and any
 * write to its tables (here, in another process, by the CLI) makes the next read go to the
 * database (issue 16). A page is kept per exact arguments, `key`. Reads inside a transaction go
 * to the database. `listed` are the tables the listing reads and those
 * whose deletes cascade into them (foreign keys change rows without a write naming them);
 * workspaces and organizations, which cascade into every listed row, are always added.
 */
export function listingCache<Answer extends ListingAnswer = Buffer>(listed: readonly string[]) {
  const tables = readByCaches([...listed, ...OWNERS]);
  const caches = new WeakMap<Db, ExactCache<Answer> | null>();
  /** `version`: the data_version the request read at authentication (ExactCache.get). */
  return async (db: Db, key: string, load: () => Promise<Answer>, version?: number): Promise<Answer> => {
    if (db.isTransaction) return load();
    let cache = caches.get(db);
    if (cache === undefined) {
      cache = ExactCache.for<Answer>(db, tables, LIMITS) ?? null;
      caches.set(db, cache);
    }
    return cache ? ((await cache.get(key, load, version)) ?? load()) : load();
  };
}

const OWNERS = ['workspaces', 'organizations'];

/** Per listing and database: the few pages clients ask again and again, within 16 MB of bodies. */
const LIMITS = {
  entries: 1000,
  weight: 16 * 1024 * 1024,
  weigh: (answer: unknown) => (Buffer.isBuffer(answer) ? answer : (answer as { page: string }).page).length,
};
