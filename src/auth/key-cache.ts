import type { Db } from '../db/database.js';
import { ExactCache, readByCaches } from '../db/exact-cache.js';

/**
 * What an authenticated key may do is read from these tables (the key, its workspace, its
 * user's membership; users and organizations cascade their deletes into them).
 */
const ACCESS_TABLES = readByCaches(['api_keys', 'workspaces', 'workspace_members', 'users', 'organizations']);

/**
 * Authenticated key rows kept in memory, exactly (src/db/exact-cache.ts): a key revoked over the
 * API or by `atrium keys revoke` is refused on the very next request, on every process. Only
 * keys found are kept.
 */
export function apiKeyCache<Row>(db: Db): ExactCache<Row> | undefined {
  // Far more keys than a deployment uses at once; past it the cache starts over.
  return ExactCache.for<Row>(db, ACCESS_TABLES, { entries: 10_000 });
}
