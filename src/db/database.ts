import path from 'node:path';
import SQLite from 'better-sqlite3';
import {
  Kysely,
  type MigrationResultSet,
  Migrator,
  SqliteAdapter,
  SqliteDialect,
  sql,
  type Transaction,
} from 'kysely';
import pg from 'pg';
import * as sqliteVec from 'sqlite-vec';
import { DEFAULT_DB_CONNECT_TIMEOUT_MS, type DatabaseConfig } from '../config.js';
import { WalCheckpointer } from './wal-checkpointer.js';
import { registerChangeSignals, SqliteChangeSignals } from './change-signals.js';
import { migrations } from './migrations/index.js';
import { PgChangeSignals, SignalledPostgresDialect } from './pg-change-signals.js';
import { PreparingClient } from './pg-statements.js';
import type { Database } from './schema.js';
import { makeDirectorySync } from '../make-directory.js';

export type Db = Kysely<Database>;
/** What a repository function runs on: the database or a transaction. */
export type Executor = Db | Transaction<Database>;
export type Dialect = 'sqlite' | 'postgres';

/** Which engine a connection (or a transaction) talks to, from its adapter. */
export function dialectOf(db: Db): Dialect {
  return db.getExecutor().adapter instanceof SqliteAdapter ? 'sqlite' : 'postgres';
}

/**
 * Runs `read` in one snapshot of the database: its statements, run one after another, see the
 * same data whatever commits between them (another request's write, another process's). On
 * PostgreSQL a read-only REPEATABLE READ transaction, whose snapshot is taken at its first
 * statement; on SQLite a deferred transaction, whose first read fixes the snapshot (WAL) and
 * which holds the process's one connection until it ends: keep `read` to a few quick statements.
 */
export function inReadSnapshot<T>(db: Db, read: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  const transaction = db.transaction();
  const snapshot =
    dialectOf(db) === 'postgres'
      ? transaction.setIsolationLevel('repeatable read').setAccessMode('read only')
      : transaction;
  return snapshot.execute(read);
}

export interface DatabaseHandle {
  db: Db;
  dialect: Dialect;
  /** The PostgreSQL schema the tables live in, when not the default one. */
  schema?: string;
  close(): Promise<void>;
}

// PostgreSQL returns int8 (bigint, count(*)) as strings; our numbers stay below 2^53.
const pgTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
};

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * better-sqlite3 compiles a statement on every `prepare`, and Kysely prepares every query it runs;
 * compiling was a third of a list request's time. Kysely generates the same SQL text for the same
 * query shape, so a bounded cache of compiled statements keyed by that text removes the cost.
 * Reuse is safe: better-sqlite3 runs a statement to completion synchronously. A statement that
 * may write tells the checkpointer, which checkpoints the log a little later in its own thread.
 */
function withStatementCache(sqlite: SQLite.Database, checkpointer: WalCheckpointer, capacity = 500) {
  const cache = new Map<string, SQLite.Statement>();
  return {
    close: () => {
      checkpointer.closeNow();
      sqlite.close();
    },
    prepare(sqlText: string) {
      let statement = cache.get(sqlText);
      if (!statement) {
        statement = sqlite.prepare(sqlText);
        if (cache.size >= capacity) cache.delete(cache.keys().next().value!);
        cache.set(sqlText, statement);
      }
      // A transaction's writes may end long after they began: its commit asks again.
      if (!statement.readonly || sqlText === 'commit') checkpointer.wrote();
      return statement;
    },
  };
}

/**
 * The better-sqlite3 connection behind each SQLite Kysely, for the few statements every request
 * runs (the key cache's version check, the rate-limit count): run on it directly they skip
 * Kysely's building, compiling, connection mutex and promise hops, which cost several times the
 * statement itself in a busy process (issue 16).
 */
const sqliteConnections = new WeakMap<Db, SQLite.Database>();
const directStatements = new WeakMap<SQLite.Database, Map<string, SQLite.Statement>>();
const checkpointers = new WeakMap<SQLite.Database, WalCheckpointer>();

/**
 * A statement to run directly on `db`'s SQLite connection now, or undefined when that is not
 * safe, so the caller goes through Kysely: on PostgreSQL, on a transaction object, and while a
 * transaction is open on the connection (another request's: a statement run now would join it,
 * and a read would see its snapshot rather than the latest commit). Statements run this way
 * bypass Kysely's plugins, so they must not write tables an exact cache watches
 * (src/db/change-signals.ts).
 */
export function directSqliteStatement(db: Executor, sqlText: string): SQLite.Statement | undefined {
  const sqlite = sqliteConnections.get(db as Db);
  if (!sqlite || sqlite.inTransaction) return undefined;
  let statements = directStatements.get(sqlite);
  if (!statements) directStatements.set(sqlite, (statements = new Map()));
  let statement = statements.get(sqlText);
  if (!statement) statements.set(sqlText, (statement = sqlite.prepare(sqlText)));
  if (!statement.readonly) checkpointers.get(sqlite)?.wrote();
  return statement;
}

/** The checkpointer of a SQLite database's log (wal-checkpointer.ts); undefined on PostgreSQL. */
export function walCheckpointerOf(db: Db): WalCheckpointer | undefined {
  const sqlite = sqliteConnections.get(db);
  return sqlite && checkpointers.get(sqlite);
}

/**
 * sqlite-vec gives vector search (knowledge.md). It is optional: where its binary does not load
 * (musl, an unsupported platform) the service runs without it, and project search stays
 * lexical (`vectors: "unavailable"` in the index summary and `/readyz`).
 */
function loadVectorExtension(sqlite: SQLite.Database): void {
  try {
    sqliteVec.load(sqlite);
  } catch {
    // Told by detectVectorSupport (src/knowledge/vector-store.ts), where it matters.
  }
}

/**
 * The embedded database's file, in WAL mode. SQLite's own errors ("unable to open database file",
 * "file is not a database") do not say which file: an operator whose data dir is a file, or whose
 * database is damaged, is told its path.
 */
function openSqliteFile(file: string): SQLite.Database {
  let sqlite: SQLite.Database | undefined;
  try {
    sqlite = new SQLite(file);
    sqlite.pragma('journal_mode = WAL');
    return sqlite;
  } catch (error) {
    sqlite?.close();
    if (!(error instanceof SQLite.SqliteError)) throw error;
    throw new SQLite.SqliteError(`${error.message}: ${file}`, error.code);
  }
}

export interface OpenHooks {
  /**
   * Told when the server closes a pooled PostgreSQL connection (a restart, a failover, an
   * administrator, a pooler's idle timeout). The pool replaces it; a statement running on it
   * fails as any lost connection's would.
   */
  onConnectionLost?: (error: Error) => void;
}

export async function openDatabase(config: DatabaseConfig, hooks: OpenHooks = {}): Promise<DatabaseHandle> {
  if (config.kind === 'sqlite') {
    makeDirectorySync(path.dirname(config.file));
    const sqlite = openSqliteFile(config.file);
    sqlite.pragma('foreign_keys = ON');
    sqlite.pragma('busy_timeout = 5000');
    sqlite.pragma('synchronous = NORMAL');
    loadVectorExtension(sqlite);
    // The log is checkpointed off the event loop's thread (wal-checkpointer.ts).
    const checkpointer = new WalCheckpointer(sqlite, config.file);
    checkpointers.set(sqlite, checkpointer);
    // Tells exact caches (src/db/exact-cache.ts) when data may have changed.
    const signals = new SqliteChangeSignals();
    const db = new Kysely<Database>({
      dialect: new SqliteDialect({ database: withStatementCache(sqlite, checkpointer) }),
      plugins: [signals],
    });
    registerChangeSignals(db as never, signals);
    sqliteConnections.set(db, sqlite);
    const close = async () => {
      // The worker first, then what is left of the log, while the connection is still open.
      await checkpointer.close();
      await db.destroy();
    };
    return { db, dialect: 'sqlite', close };
  }

  const connectTimeoutMs = databaseConnectTimeoutMs(config);
  if (config.schema) {
    // Tests give every app its own schema in one database; create it before the pool uses it.
    const client = new pg.Client({ connectionString: config.url, connectionTimeoutMillis: connectTimeoutMs });
    await client.connect();
    try {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(config.schema)}`);
    } finally {
      await client.end();
    }
  }
  const options = config.schema ? `-c search_path=${config.schema}` : undefined;
  const pool = new pg.Pool({
    connectionString: config.url,
    max: 10,
    types: pgTypes,
    Client: PreparingClient,
    options,
    // A server that does not answer (a blackholed host, a partition) neither refuses nor closes
    // a connection: pg's default waited for ever, and so did every request. Past this a statement
    // fails, a 503 (network-errors.ts). It bounds a wait for a free pooled connection too: a
    // process that busy answers 503 with Retry-After rather than hold its requests.
    connectionTimeoutMillis: connectTimeoutMs,
    // The kernel probes a connection silent this long, then every second, ten times (Node's
    // settings): one whose server's host vanished while a statement awaited its answer fails
    // about 20 s later (a 503), not after Linux's default of over two hours. A live server's
    // kernel answers the probes, however long its statement runs.
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEP_ALIVE_IDLE_MS,
  });
  // pg emits 'error' on a connection the server closed, and an 'error' event nobody hears is
  // thrown: one idle connection ended by the server ended the whole process. Each connection
  // reports its own, idle in the pool or in use; the pool repeats an idle one's, heard here.
  const lost = (error: Error) => hooks.onConnectionLost?.(error);
  pool.on('connect', (client) => client.on('error', lost));
  pool.on('error', () => {});
  // Tells exact caches (src/db/exact-cache.ts) when data may have changed, on every process.
  const signals = new PgChangeSignals({ connectionString: config.url, options });
  const db = new Kysely<Database>({ dialect: new SignalledPostgresDialect({ pool }, signals) });
  registerChangeSignals(db as never, signals);
  const close = async () => {
    await signals.close();
    await db.destroy();
  };
  return { db, dialect: 'postgres', schema: config.schema, close };
}

export function migrateToLatest(db: Db, schema?: string): Promise<string[]> {
  return runMigrator(db, schema, (migrator) => migrator.migrateToLatest());
}

/** Migrates up or down to the migration `name` (tests of a migration's up and down). */
export function migrateTo(db: Db, schema: string | undefined, name: string): Promise<string[]> {
  return runMigrator(db, schema, (migrator) => migrator.migrateTo(name));
}

async function runMigrator(
  db: Db,
  schema: string | undefined,
  run: (migrator: Migrator) => Promise<MigrationResultSet>,
): Promise<string[]> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    // Kysely looks for its bookkeeping tables in every schema unless told which one is ours.
    migrationTableSchema: schema,
  });
  for (let attempt = 1; ; attempt++) {
    const { error, results } = await withSqliteMigrationLock(db, () => run(migrator));
    if (error && attempt < MIGRATION_ATTEMPTS && catalogChangedMeanwhile(error, schema)) {
      await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      continue;
    }
    if (error) throw error;
    return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
  }
}

/** How long a process waits for another one's migration of the same SQLite file. */
const MIGRATION_LOCK_WAIT_MS = 30 * 60_000;

/**
 * Runs `migrate` while holding a lock every process migrating the same SQLite file takes first:
 * an exclusive transaction on a database file of its own beside it. Kysely's migrator takes no
 * lock on SQLite (its adapter's is a no-op), so two processes starting at once both ran the
 * pending migrations, and one failed its start ("table already exists"). The second now waits
 * (synchronously: nothing is served before the migrations) and then finds nothing to do. The
 * operating system releases the lock of a process that dies holding it. PostgreSQL's migrator
 * takes a lock of its own.
 */
async function withSqliteMigrationLock<T>(db: Db, migrate: () => Promise<T>): Promise<T> {
  const sqlite = sqliteConnections.get(db);
  if (!sqlite || sqlite.memory) return migrate();
  const lock = new SQLite(`${sqlite.name}-migration-lock`, { timeout: MIGRATION_LOCK_WAIT_MS });
  try {
    lock.exec('begin exclusive');
    return await migrate();
  } finally {
    // Closing the connection ends its transaction, and with it the lock.
    lock.close();
  }
}

/** Runs of the migrator before a catalog race is reported as the failure it is. */
const MIGRATION_ATTEMPTS = 5;

/**
 * Kysely's migrator lists the tables of every schema of the database to find its own, and that
 * listing calls `pg_get_serial_sequence` for each column, which reads the live catalog: a
 * schema, table or column that someone else drops or changes meanwhile (another application
 * sharing the database, a test suite migrating and cleaning up in parallel) fails the listing
 * with `invalid_schema_name` (3F000), `undefined_table` (42P01, the name schema-qualified) or
 * `undefined_column` (42703). Such a run has changed nothing (the listing comes before the
 * migrations, which on PostgreSQL run in one transaction), so it is run again. An error of
 * Atrium's own migrations that looks alike fails every attempt and is thrown after the last.
 */
export function catalogChangedMeanwhile(error: unknown, schema: string | undefined): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  const ours = schema !== undefined && error.message.includes(`"${schema}`);
  if (code === '3F000') return !ours;
  if (code === '42P01') return !ours && /^relation "[^"]+\.[^"]+" does not exist$/.test(error.message);
  return code === '42703' && /^column "[^"]+" of relation "[^"]+" does not exist$/.test(error.message);
}

/** Silence on a PostgreSQL connection before the kernel probes whether its server is there. */
const KEEP_ALIVE_IDLE_MS = 10_000;

/** How long a statement waits for a PostgreSQL connection (ATRIUM_DB_CONNECT_TIMEOUT_MS). */
export function databaseConnectTimeoutMs(config: DatabaseConfig): number {
  return (config.kind === 'postgres' && config.connectTimeoutMs) || DEFAULT_DB_CONNECT_TIMEOUT_MS;
}

/**
 * Resolves once the database has answered a trivial statement, rejects if it has not within
 * `withinMs`. A connection already open to a server that stopped answering fails no statement
 * for many minutes (no statement timeout: migrations and index builds run long; see README
 * "Timeouts"), and `/readyz` must say so meanwhile. The statement is not cancelled, only no
 * longer waited for: it ends when the connection does, or when the server answers again.
 */
export async function pingDatabase(db: Db, withinMs: number): Promise<void> {
  const ping = sql`select 1`.execute(db);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the database did not answer within ${withinMs} ms`)),
      withinMs,
    );
  });
  try {
    await Promise.race([ping, deadline]);
  } finally {
    clearTimeout(timer);
    ping.catch(() => {});
  }
}
