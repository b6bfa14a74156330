import type { Db } from './database.js';
import { type ChangeSignals, changeSignalsOf, type WrittenTables } from './change-signals.js';

export interface ExactCacheLimits {
  /** Entries kept at most; past it the cache starts over. */
  entries: number;
  /** The summed weight of the entries kept at most (for text: its length). */
  weight?: number;
  weigh?: (value: unknown) => number;
}

/** Every table an exact cache reads from (tablesReadByCaches). */
const cachedTables = new Set<string>();

/**
 * Notes that caches read from `tables`, and returns them. The caches of this codebase call it
 * when their module loads, so the list is whole once the app is built: a test checks that each
 * of these tables has its change trigger on PostgreSQL.
 */
export function readByCaches(tables: readonly string[]): readonly string[] {
  for (const table of tables) cachedTables.add(table);
  return tables;
}

/** The tables exact caches read from: each must tell every process of its changes. */
export function tablesReadByCaches(): ReadonlySet<string> {
  return cachedTables;
}

/** The version reading the callers of this poll phase share, per database (readVersion). */
const pollPhaseReadings = new WeakMap<ChangeSignals, Promise<number>>();

/**
 * The check phase's scheduler, taken when the module loads: tests that fake timers replace the
 * global one, and no request could then be authenticated.
 */
const afterPollPhase = globalThis.setImmediate;

/**
 * Values read from the database kept in memory, exact on both engines (issue 16): the cache is
 * emptied by every write to the tables its values are read from, and no lookup returns what the
 * database would no longer answer, on any process. A value read while the data changed is not
 * kept. How the writes are told (ChangeSignals):
 * - SQLite: this process's writes through Kysely, before and after they run, and PRAGMA
 *   data_version (read after the requests that use it arrived, see readVersion), which changes
 *   whenever another connection (another `atrium serve`, `atrium keys revoke`) has committed;
 * - PostgreSQL: this process's writes once committed, other processes' by LISTEN/NOTIFY, and a
 *   writer returns only once every process answering from memory has seen its change; a process
 *   keeps nothing while it cannot take part (src/db/pg-change-signals.ts).
 */
export class ExactCache<Value> {
  private readonly values = new Map<string, Value>();
  private weight = 0;
  /** Bumped by every emptying: a value read before it is stale. */
  private generation = 0;
  private version: number | undefined;

  private constructor(
    private readonly db: Db,
    private readonly signals: ChangeSignals,
    private readonly tables: readonly string[],
    private readonly limits: ExactCacheLimits,
  ) {
    signals.onWrite((written) => {
      if (this.touches(written)) this.clear();
    });
  }

  /** A cache of values read from `tables` (undefined for a database openDatabase did not open). */
  static for<Value>(
    db: Db,
    tables: readonly string[],
    limits: ExactCacheLimits,
  ): ExactCache<Value> | undefined {
    const signals = changeSignalsOf(db as never);
    return signals ? new ExactCache<Value>(db, signals, tables, limits) : undefined;
  }

  /**
   * The database's version (SQLite: PRAGMA data_version; PostgreSQL: the lease's), read at the
   * end of the current poll phase of the event loop, one reading for every caller until then.
   * Authentication reads it once per request and hands it to the request's later lookups
   * (`get`'s `version`), instead of each lookup reading it again. Exact: the reading follows the
   * arrival of every request that uses it, so it shows every commit made before any of them was
   * sent. Shared because on SQLite each reading is a read transaction (two file locks in WAL
   * mode, the largest part of a cached listing's cost); and the requests of one poll phase then
   * go on together, their responses leaving back to back (issue 16, BENCHMARKS.md).
   */
  readVersion(): Promise<number> {
    let reading = pollPhaseReadings.get(this.signals);
    if (!reading) {
      reading = new Promise<number>((resolve, reject) => {
        afterPollPhase(() => {
          // Dropped before reading: a caller from here on needs a reading that follows it.
          pollPhaseReadings.delete(this.signals);
          this.signals.externalVersion(this.db as never).then(resolve, reject);
        });
      });
      pollPhaseReadings.set(this.signals, reading);
    }
    return reading;
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
    // A table whose changes are not told (PostgreSQL: no trigger): nothing is kept, and nothing
    // kept before is answered later, when it may be told again, for changes made meanwhile.
    if (!this.signals.tellsChangesTo(this.tables)) {
      this.clear();
      return load();
    }
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
