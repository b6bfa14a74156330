import type { Db } from '../db/database.js';
import { changeSignalsOf, type SqliteChangeSignals, type WrittenTables } from '../db/change-signals.js';

/**
 * What an authenticated key may do is read from these tables (the key, its workspace, its
 * user's membership; users and organizations cascade their deletes into them).
 */
const ACCESS_TABLES = ['api_keys', 'workspaces', 'workspace_members', 'users', 'organizations'];

/** Far more keys than a deployment uses at once; past it the cache starts over. */
const CAPACITY = 10_000;

/**
 * Authenticated key rows kept in memory, exact on SQLite (issue 16): the cache is emptied by
 * every write this process makes to the tables a key's access is read from (reported by
 * Kysely before the write runs) and, before each lookup, whenever PRAGMA data_version says
 * another connection (another `atrium serve`, `atrium keys revoke`) has committed since. A
 * revoked key is thus refused on the very next request, on every process. Only keys found are
 * kept, and a row read while the data changed is not kept. PostgreSQL has no such cheap,
 * synchronous signal (LISTEN/NOTIFY arrives late), so there every lookup reads the database.
 */
export class ApiKeyCache<Row> {
  private readonly rows = new Map<string, Row>();
  /** Bumped by every emptying: a row read before it is stale. */
  private generation = 0;
  private version: number | undefined;

  private constructor(
    private readonly db: Db,
    private readonly signals: SqliteChangeSignals,
  ) {
    signals.onWrite((tables) => {
      if (touchesAccess(tables)) this.clear();
    });
  }

  /** A cache for this database, or undefined where it could not stay exact (PostgreSQL). */
  static for<Row>(db: Db): ApiKeyCache<Row> | undefined {
    const signals = changeSignalsOf(db as never);
    return signals ? new ApiKeyCache<Row>(db, signals) : undefined;
  }

  /** The row for `keyHash`: from memory while nothing it depends on changed, else from `load`. */
  async get(keyHash: string, load: () => Promise<Row | undefined>): Promise<Row | undefined> {
    const version = await this.signals.externalVersion(this.db as never);
    if (version !== this.version) {
      this.clear();
      this.version = version;
    }
    const cached = this.rows.get(keyHash);
    if (cached !== undefined) return cached;
    const generation = this.generation;
    const row = await load();
    if (row !== undefined && generation === this.generation) {
      if (this.rows.size >= CAPACITY) this.rows.clear();
      this.rows.set(keyHash, row);
    }
    return row;
  }

  private clear(): void {
    this.rows.clear();
    this.generation++;
  }
}

function touchesAccess(tables: WrittenTables): boolean {
  return tables === 'unknown' || ACCESS_TABLES.some((table) => tables.has(table));
}
