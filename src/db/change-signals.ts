import {
  CompiledQuery,
  type Kysely,
  type KyselyPlugin,
  type OperationNode,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type UnknownRow,
} from 'kysely';
import { directSqliteStatement } from './database.js';

/** The tables a write touches; `unknown` when it cannot be told (raw SQL, schema changes). */
export type WrittenTables = ReadonlySet<string> | 'unknown';

/**
 * How a database tells the exact caches (src/db/exact-cache.ts) that data may have changed:
 * `onWrite` reports writes (this process's, and on PostgreSQL other processes' too), and
 * `externalVersion` changes whenever the caches can no longer trust what they hold for another
 * reason (SQLite: another connection committed; PostgreSQL: no lease).
 */
export interface ChangeSignals {
  onWrite(listener: (tables: WrittenTables) => void): void;
  externalVersion(db: Kysely<unknown>): Promise<number>;
  /**
   * Whether other processes' writes to every one of `tables` are told: a cache of tables that
   * are not must read the database on every lookup.
   */
  tellsChangesTo(tables: readonly string[]): boolean;
}

/**
 * How a SQLite connection tells that the data may have changed, for caches that must stay exact
 * (src/db/exact-cache.ts): every write this process sends through Kysely is reported before it
 * runs and again once it has run, and PRAGMA data_version changes whenever another connection
 * (another process, the CLI) has committed. Installed as a plugin, so transactions report their
 * writes too. The second report matters to reads that skip Kysely's connection queue
 * (directSqliteStatement): one can run between a write's first report and the write itself.
 */
export class SqliteChangeSignals implements KyselyPlugin, ChangeSignals {
  private readonly listeners = new Set<(tables: WrittenTables) => void>();
  /** The tables of writes reported and not yet run, by query (a failed write's entry just goes). */
  private readonly pending = new WeakMap<object, WrittenTables>();

  transformQuery({ node, queryId }: PluginTransformQueryArgs): RootOperationNode {
    if (this.listeners.size > 0 && (node.kind !== 'SelectQueryNode' || node.with)) {
      const tables = writtenTables(node);
      this.pending.set(queryId, tables);
      this.report(tables);
    }
    return node;
  }

  async transformResult({ result, queryId }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    const tables = this.pending.get(queryId);
    if (tables !== undefined) {
      this.pending.delete(queryId);
      this.report(tables);
    }
    return result;
  }

  private report(tables: WrittenTables): void {
    for (const listener of this.listeners) listener(tables);
  }

  onWrite(listener: (tables: WrittenTables) => void): void {
    this.listeners.add(listener);
  }

  /** data_version changes with another connection's commit to any table. */
  tellsChangesTo(): boolean {
    return true;
  }

  /**
   * SQLite's data_version, read on the connection every query uses once no transaction holds it
   * (inside another request's open transaction it could show that transaction's older snapshot):
   * directly when the connection is free, as it is for nearly every request, else through Kysely,
   * which waits for the transaction to end. Run past the plugins: it writes nothing. Each reading
   * is a read transaction (two file locks in WAL mode): the exact caches share one per poll
   * phase (ExactCache.readVersion).
   */
  async externalVersion(db: Kysely<unknown>): Promise<number> {
    const direct = directSqliteStatement(db as never, DATA_VERSION);
    // Plucked: the number alone, no row object per request.
    if (direct) return direct.pluck().get() as number;
    const result = await db
      .getExecutor()
      .provideConnection((connection) =>
        connection.executeQuery<{ data_version: number }>(CompiledQuery.raw(DATA_VERSION)),
      );
    return result.rows[0]!.data_version;
  }
}

const DATA_VERSION = 'pragma data_version';

const registered = new WeakMap<object, ChangeSignals>();

/** Called by openDatabase: the signals of the database it opened. */
export function registerChangeSignals(db: Kysely<unknown>, signals: ChangeSignals): void {
  registered.set(db, signals);
}

/** The change signals of a database opened by openDatabase. */
export function changeSignalsOf(db: Kysely<unknown>): ChangeSignals | undefined {
  return registered.get(db);
}

/**
 * The table a raw statement writes: none for a plain select, the target of a plain insert,
 * update or delete; anything else (several statements, a CTE, a schema change) is `unknown`.
 */
function rawWrittenTables(text: string): WrittenTables {
  if (/^\s*select\s/i.test(text)) return new Set();
  if (/;\s*\S/.test(text)) return 'unknown';
  const target = /^\s*(?:insert\s+into|update|delete\s+from)\s+"?([a-z_][a-z0-9_]*)"?(?=[\s(]|$)/i.exec(text);
  return target ? new Set([target[1]!.toLowerCase()]) : 'unknown';
}

/**
 * The tables a statement writes: the target of an insert, update or delete (what its foreign
 * keys cascade from is reported as that target). A raw statement is read-only only when it is a
 * plain select; anything else (data-modifying CTEs, schema changes, other raw SQL) is `unknown`.
 */
export function writtenTables(node: RootOperationNode): WrittenTables {
  if ('with' in node && node.with) return 'unknown';
  let target: unknown;
  if (node.kind === 'InsertQueryNode') target = node.into;
  else if (node.kind === 'UpdateQueryNode') target = node.table;
  else if (node.kind === 'DeleteQueryNode') target = node.from;
  else if (node.kind === 'RawNode') return rawWrittenTables(node.sqlFragments.join('?'));
  else return 'unknown';
  const tables = new Set<string>();
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) {
      for (const item of value) visit(item);
      return;
    }
    if (typeof value !== 'object' || value === null) return;
    const operation = value as OperationNode & { table?: { identifier?: { name?: string } } };
    if (operation.kind === 'TableNode' && operation.table?.identifier?.name) {
      tables.add(operation.table.identifier.name);
      return;
    }
    for (const child of Object.values(value)) visit(child);
  };
  visit(target);
  return tables.size > 0 ? tables : 'unknown';
}
