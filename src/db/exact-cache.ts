import type { Db } from './database.js';
import { changeSignalsOf, type SqliteChangeSignals, type WrittenTables } from './change-signals.js';

export interface ExactCacheLimits {
  /** Entries kept at most; past it the cache starts over. */
  entries: number;
  /** The summed weight of the entries kept at most (for text: its length). */
  weight?: number;
  weigh?: (value: unknown) => number;
}

/**
 * Values read from the database kept in memory, exact on SQLite (issue 16): the cache is emptied
 * by every write this process makes to the tables its values are read from (reported by Kysely
 * before and after the write runs) and, before each lookup, whenever PRAGMA data_version says
 * another connection (another `atrium serve`, `atrium keys revoke`) has committed since. A
 * lookup thus never returns what the database would no longer answer, on any process. A value
 * read while the data changed is not kept. PostgreSQL has no such cheap, synchronous signal
 * (LISTEN/NOTIFY arrives late), so there `for` gives no cache and every lookup reads.
 */
export class ExactCache<Value> {
  private readonly values = new Map<string, Value>();
  private weight = 0;
  /** Bumped by every emptying: a value read before it is stale. */
  private generation = 0;
  private version: number | undefined;

  private constructor(
    private readonly db: Db,
    private readonly signals: SqliteChangeSignals,
    private readonly tables: readonly string[],
    private readonly limits: ExactCacheLimits,
  ) {
    signals.onWrite((written) => {
      if (this.touches(written)) this.clear();
    });
  }

  /** A cache of values read from `tables`, or undefined where it could not stay exact. */
  static for<Value>(
    db: Db,
    tables: readonly string[],
    limits: ExactCacheLimits,
  ): ExactCache<Value> | undefined {
    const signals = changeSignalsOf(db as never);
    return signals ? new ExactCache<Value>(db, signals, tables, limits) : undefined;
  }

  /**
   * PRAGMA data_version now. Authentication reads it once per request and hands it to the
   * request's later lookups (`get`'s `version`), instead of each lookup reading it again.
   */
  readVersion(): Promise<number> {
    return this.signals.externalVersion(this.db as never);
  }

  /**
   * The value for `key`: from memory while nothing it depends on changed, else from `load`.
   * `version`, when given, is a data_version this request read earlier (at authentication): the
   * request is answered as of that moment, which is as exact as a request that started then.
   * Values are never kept under a version newer than their read (an older one only empties the
   * cache once more), so a later request never sees data older than its own start.
   */
  async get(
    key: string,
    load: () => Promise<Value | undefined>,
    version?: number,
  ): Promise<Value | undefined> {
    version ??= await this.readVersion();
    if (version !== this.version) {
      this.clear();
      this.version = version;
    }
    const cached = this.values.get(key);
    if (cached !== undefined) return cached;
    const generation = this.generation;
    const value = await load();
    if (value !== undefined && generation === this.generation) this.keep(key, value);
    return value;
  }

  private keep(key: string, value: Value): void {
    const weight = this.limits.weigh?.(value) ?? 0;
    if (this.limits.weight !== undefined && weight > this.limits.weight) return;
    if (
      this.values.size >= this.limits.entries ||
      (this.limits.weight !== undefined && this.weight + weight > this.limits.weight)
    ) {
      this.values.clear();
      this.weight = 0;
    }
    this.values.set(key, value);
    this.weight += weight;
  }

  private touches(written: WrittenTables): boolean {
    return written === 'unknown' || this.tables.some((table) => written.has(table));
  }

  private clear(): void {
    this.values.clear();
    this.weight = 0;
    this.generation++;
  }
}
