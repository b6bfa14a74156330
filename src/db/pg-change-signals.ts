import {
  type CompiledQuery,
  type DatabaseConnection,
  type Driver,
  PostgresDialect,
  type PostgresDialectConfig,
  type QueryResult,
} from 'kysely';
import pg from 'pg';
import { newId } from '../ids.js';
import { type ChangeSignals, type WrittenTables, writtenTables } from './change-signals.js';

const CHANNEL = 'atrium_changes';
/**
 * How long a lease written to cache_peers lasts, and how often a process renews its own. Short,
 * because a process that dies holding one makes every write to a cached table wait it out.
 */
const LEASE_MS = 2000;
const RENEW_MS = 500;
/** A process stops answering from memory this long before its lease ends on the database. */
const LEASE_MARGIN_MS = 500;
/** How long a listener that failed waits before connecting again. */
const RECONNECT_MS = 1000;
/** Renewals between two readings of which tables notify (a migration may add some). */
const RENEWALS_PER_TRIGGER_READ = 20;

/**
 * How caches stay exact on PostgreSQL (src/db/exact-cache.ts, migration 016), without a round
 * trip per lookup:
 * - every write to a cached table notifies `atrium_changes` at commit (a trigger); each process
 *   listens on a connection of its own and empties the caches of that table at once;
 * - a process answers from memory only while it holds a lease in `cache_peers`. It renews it
 *   every half second with a statement that also notifies itself, and the lease counts only
 *   once that notice has come back: notices arrive in commit order, so by then every change
 *   committed before the renewal has been seen. It writes a lease only while its notices come
 *   back (else it probes), so a connection pooler that drops notices leaves it without a lease,
 *   never with a stale cache, and no writer waits for it;
 * - a process that wrote a cached table through Kysely (a request, `atrium keys revoke`) waits,
 *   once its write has committed and its pooled connection is back in the pool, until every
 *   other process holding a lease has confirmed a barrier notified after the write. A process
 *   that does not confirm is waited for until its lease ends, when it has stopped answering
 *   from memory on its own; no wait lasts longer than a lease.
 * A key revoked or a project renamed through one process is thus refused or shown by every
 * other on its very next request, as on SQLite. The cost falls on writes (one query, and when
 * other processes hold leases a notification and their answers), not on reads.
 */
export class PgChangeSignals implements ChangeSignals {
  private readonly listeners = new Set<(tables: WrittenTables) => void>();
  private readonly processId = newId('prc');
  private readonly watched = new WeakSet<DatabaseConnection>();
  /** What a pooled connection committed, signalled once Kysely has released it. */
  private readonly committedOn = new WeakMap<DatabaseConnection, WrittenTables>();
  /** The listening connection, once connected; `listening` while it connects. */
  private listener: Listener | undefined;
  private listening: Promise<Listener | undefined> | undefined;
  private schema: string | undefined;
  /** The tables whose writes notify (migration 016's triggers), read from the database. */
  private notifying = new Set<string>();
  /** Whether the lease is wanted (a cache asked for a version), and its renewal timer. */
  private leasing = false;
  private renewal: NodeJS.Timeout | undefined;
  private renewals = 0;
  /** Whether this process's last notice to itself came back (probes, then leases). */
  private noticesReturn = false;
  /** When each renewal not yet heard back was sent (performance.now()), by number. */
  private readonly renewalsSent = new Map<number, number>();
  /** Until when (performance.now()) this process may answer from memory. */
  private validUntil = 0;
  /** The version while the lease holds: changed whenever it is (re)gained. */
  private epoch = 0;
  /** Versions handed out without a lease: each one new, so nothing is kept between lookups. */
  private unleased = -1;
  private barriers = 0;
  private readonly awaiting = new Map<number, { peers: Set<string>; done: () => void }>();
  private closed = false;

  constructor(
    private readonly settings: pg.ClientConfig,
    private readonly Client: typeof pg.Client = pg.Client,
  ) {}

  onWrite(listener: (tables: WrittenTables) => void): void {
    this.listeners.add(listener);
  }

  /**
   * Whether each of `tables` has the change trigger (as last read, at most 10 s ago): a table
   * without it (`providers` before migration 032, a trigger dropped by hand, a cache added
   * without its migration) notifies nobody, so a cache reading it must not answer from memory.
   */
  tellsChangesTo(tables: readonly string[]): boolean {
    return tables.every((table) => this.notifying.has(table));
  }

  /** The lease's version while it holds; otherwise a new number on every call. */
  async externalVersion(): Promise<number> {
    if (!this.leasing) this.startLease();
    return performance.now() < this.validUntil ? this.epoch : this.unleased--;
  }

  /** Kysely's PostgreSQL driver, with every connection watched and the barrier after release. */
  wrap(driver: Driver): Driver {
    return {
      init: () => driver.init(),
      acquireConnection: async () => {
        const connection = await driver.acquireConnection();
        this.watch(connection);
        return connection;
      },
      beginTransaction: (connection, settings) => driver.beginTransaction(connection, settings),
      commitTransaction: (connection) => driver.commitTransaction(connection),
      rollbackTransaction: (connection) => driver.rollbackTransaction(connection),
      savepoint: driver.savepoint?.bind(driver),
      rollbackToSavepoint: driver.rollbackToSavepoint?.bind(driver),
      releaseSavepoint: driver.releaseSavepoint?.bind(driver),
      // Released first: a barrier waiting on another process must not hold a pooled connection.
      releaseConnection: async (connection) => {
        const tables = this.committedOn.get(connection);
        this.committedOn.delete(connection);
        await driver.releaseConnection(connection);
        if (tables) await this.committed(tables);
      },
      destroy: () => driver.destroy(),
    };
  }

  /**
   * Notes what a pooled connection commits: a write outside a transaction once it has run, a
   * transaction's writes once its commit has run. The process's own caches are emptied only
   * then (emptied before, a read on another connection could keep the old rows).
   */
  private watch(connection: DatabaseConnection): void {
    if (this.watched.has(connection)) return;
    this.watched.add(connection);
    const execute = connection.executeQuery.bind(connection);
    let inTransaction = false;
    let written: WrittenTables | undefined;
    const note = (tables: WrittenTables) =>
      this.committedOn.set(connection, joined(this.committedOn.get(connection), tables));
    connection.executeQuery = async <R>(query: CompiledQuery): Promise<QueryResult<R>> => {
      const command = transactionCommand(query);
      if (command === 'begin') {
        const result = await execute<R>(query);
        inTransaction = true;
        written = undefined;
        return result;
      }
      if (command === 'commit' || command === 'rollback') {
        const tables = written;
        inTransaction = false;
        written = undefined;
        try {
          return await execute<R>(query);
        } finally {
          // A commit that failed may still have committed (its answer lost): signal it anyway.
          if (command === 'commit' && tables) note(tables);
        }
      }
      const tables = command === 'savepoint' ? undefined : writes(query);
      try {
        const result = await execute<R>(query);
        if (tables && inTransaction) written = joined(written, tables);
        else if (tables) note(tables);
        return result;
      } catch (error) {
        // Without an SQLSTATE the connection failed, not the statement: it may have committed.
        if (tables && !inTransaction && !(error as { code?: string }).code) note(tables);
        throw error;
      }
    };
  }

  private async committed(tables: WrittenTables): Promise<void> {
    for (const listener of this.listeners) listener(tables);
    if (tables === 'unknown' || tables.size > 0) await this.barrier(tables);
  }

  /**
   * Returns once every other process holding a lease has seen what this process committed so
   * far, or its lease has ended (a lease granted after the commit comes with the change seen).
   * Without other leases: at once, after one query. Never longer than a lease.
   */
  private async barrier(tables: WrittenTables): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const leasesEnded = new Promise<void>((resolve) => (timer = setTimeout(resolve, LEASE_MS + 100)));
    try {
      await Promise.race([this.confirmedByPeers(tables, leasesEnded), leasesEnded]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async confirmedByPeers(tables: WrittenTables, leasesEnded: Promise<void>): Promise<void> {
    const listener = await this.listen();
    // Without a listening connection no confirmation can arrive: every lease ends meanwhile.
    if (!listener) return leasesEnded;
    // A schema change (a migration) may have added triggers.
    if (tables === 'unknown' || this.notifying.size === 0) await this.readNotifying(listener).catch(() => {});
    // Tables no cache reads from (usage, rate limits, search chunks) notify nobody.
    if (tables !== 'unknown' && ![...tables].some((table) => this.notifying.has(table))) return;
    let peers: Array<{ process_id: string; ms: number }>;
    try {
      ({ rows: peers } = await listener.query<{ process_id: string; ms: number }>(PEERS, [this.processId]));
    } catch (error) {
      // Before migration 016 (the migration itself, `atrium migrate`) no process holds a lease.
      if ((error as { code?: string }).code === UNDEFINED_TABLE) return;
      return leasesEnded;
    }
    if (peers.length === 0) return;
    const n = ++this.barriers;
    const confirmed = new Promise<void>((done) =>
      this.awaiting.set(n, { peers: new Set(peers.map((peer) => peer.process_id)), done }),
    );
    let timer: NodeJS.Timeout | undefined;
    try {
      await listener.query(NOTIFY, [CHANNEL, `barrier ${this.schema} ${this.processId} ${n}`]);
      const longestLease = Math.max(...peers.map((peer) => peer.ms)) + 100;
      await Promise.race([confirmed, new Promise((resolve) => (timer = setTimeout(resolve, longestLease)))]);
    } catch {
      await leasesEnded;
    } finally {
      clearTimeout(timer);
      this.awaiting.delete(n);
    }
  }

  private startLease(): void {
    this.leasing = true;
    const renew = () => void this.renew();
    renew();
    this.renewal = setInterval(renew, RENEW_MS);
    this.renewal.unref();
  }

  /**
   * Renews the lease; it counts once its notice comes back (`notice`). While the previous notice
   * has not come back, only a probe is sent and no lease is written: a lease nobody can use
   * (notices dropped by a pooler, a stalled connection) would make every writer wait it out.
   */
  private async renew(): Promise<void> {
    const listener = await this.listen();
    if (!listener) return;
    const n = ++this.renewals;
    try {
      if (!this.noticesReturn) {
        await listener.query(NOTIFY, [CHANNEL, `probe ${this.schema} ${this.processId} ${n}`]);
        return;
      }
      if (this.notifying.size === 0) await this.readNotifying(listener);
      // Without the triggers (before migration 016, or dropped) no change would reach this
      // process: it must not answer from memory, and no writer should wait for it.
      if (this.notifying.size === 0) return;
      this.noticesReturn = false;
      this.renewalsSent.set(n, performance.now());
      await listener.query(RENEW, [
        this.processId,
        LEASE_MS,
        CHANNEL,
        `lease ${this.schema} ${this.processId} ${n}`,
      ]);
      if (n % RENEWALS_PER_TRIGGER_READ === 0) await this.readNotifying(listener);
    } catch {
      // The lease runs out; caches are not used until a renewal succeeds.
    }
  }

  private leaseHeard(n: number): void {
    const sentAt = this.renewalsSent.get(n);
    for (const earlier of this.renewalsSent.keys()) if (earlier <= n) this.renewalsSent.delete(earlier);
    if (sentAt === undefined) return;
    // Regained after a gap: what was kept before it is dropped.
    if (performance.now() >= this.validUntil) this.epoch++;
    this.validUntil = Math.max(this.validUntil, sentAt + LEASE_MS - LEASE_MARGIN_MS);
  }

  /** The listening connection, connected on first use (undefined while it cannot connect). */
  private listen(): Promise<Listener | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    if (this.listener) return Promise.resolve(this.listener);
    this.listening ??= this.connectListener().finally(() => (this.listening = undefined));
    return this.listening;
  }

  private async connectListener(): Promise<Listener | undefined> {
    const client = new this.Client({
      ...this.settings,
      keepAlive: true,
      connectionTimeoutMillis: LEASE_MS,
      // A query unanswered this long means a dead connection: it is replaced (`lost`).
      query_timeout: LEASE_MS,
    });
    const listener = new Listener(client, () => this.lost(listener));
    client.on('notification', (message) => {
      if (this.listener === listener) this.notice(listener, message.payload ?? '');
    });
    client.on('error', () => this.lost(listener));
    client.on('end', () => this.lost(listener));
    try {
      await client.connect();
      await this.readNotifying(listener);
      await listener.query(`listen ${CHANNEL}`);
      // Leases of processes long gone (killed) are of no use to anyone.
      await listener.query(FORGET_OLD_LEASES).catch(() => {});
    } catch {
      this.lost(listener);
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS).unref());
      return undefined;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return undefined;
    }
    this.listener = listener;
    return listener;
  }

  /** Reads where this process's tables are, and which of them notify (migration 016's triggers). */
  private async readNotifying(listener: Listener): Promise<void> {
    const { rows } = await listener.query<{ schema: string; tables: string[] }>(NOTIFYING_TABLES);
    // No row: no schema on the search path exists, so no table either.
    this.schema = rows[0]?.schema;
    this.notifying = new Set(rows[0]?.tables);
  }

  private lost(listener: Listener): void {
    if (this.listener === listener) {
      this.listener = undefined;
      this.validUntil = 0;
      this.renewalsSent.clear();
      this.noticesReturn = false;
    }
    void listener.client.end().catch(() => {});
  }

  private notice(listener: Listener, payload: string): void {
    const [kind, schema, ...rest] = payload.split(' ');
    if (schema !== this.schema) return;
    if (kind === 'change') {
      const tables = new Set([rest[0]!]);
      for (const listener of this.listeners) listener(tables);
    } else if ((kind === 'lease' || kind === 'probe') && rest[0] === this.processId) {
      const before = this.noticesReturn;
      this.noticesReturn = true;
      if (kind === 'lease') this.leaseHeard(Number(rest[1]));
      // Notices arrive: take the lease now rather than at the next renewal.
      else if (!before) void this.renew();
    } else if (kind === 'barrier' && rest[0] !== this.processId) {
      // Every notification before it has been handled (they arrive in order): confirm.
      const answer = `confirm ${schema} ${rest[0]} ${rest[1]} ${this.processId}`;
      listener.query(NOTIFY, [CHANNEL, answer]).catch(() => {});
    } else if (kind === 'confirm' && rest[0] === this.processId) {
      const waiting = this.awaiting.get(Number(rest[1]));
      waiting?.peers.delete(rest[2]!);
      if (waiting?.peers.size === 0) waiting.done();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.renewal);
    const listener = this.listener;
    this.listener = undefined;
    this.validUntil = 0;
    if (!listener) return;
    if (this.leasing) await listener.query(RELEASE, [this.processId]).catch(() => {});
    await listener.client.end().catch(() => {});
  }
}

/** The listening connection: one query at a time (pg's own queueing is deprecated). */
class Listener {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly client: pg.Client,
    private readonly onTimeout: () => void,
  ) {}

  query<Row extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<Row>> {
    const run = this.queue.then(() => this.client.query<Row>(text, values));
    this.queue = run.catch((error: Error) => {
      if (/timeout/i.test(error.message)) this.onTimeout();
    });
    return run;
  }
}

/** Kysely's PostgreSQL dialect with its driver wrapped by `signals` (PgChangeSignals.wrap). */
export class SignalledPostgresDialect extends PostgresDialect {
  constructor(
    config: PostgresDialectConfig,
    private readonly signals: PgChangeSignals,
  ) {
    super(config);
  }

  override createDriver(): Driver {
    return this.signals.wrap(super.createDriver());
  }
}

const UNDEFINED_TABLE = '42P01';
const NOTIFY = 'select pg_notify($1, $2)';
const PEERS = `select process_id, (extract(epoch from lease_until - now()) * 1000)::float8 as ms
  from cache_peers where lease_until > now() and process_id <> $1`;
/** The lease, and in the same transaction the notice that makes it count. */
const RENEW = `with renewed as (
    insert into cache_peers (process_id, lease_until)
    values ($1, now() + $2 * interval '1 millisecond')
    on conflict (process_id) do update set lease_until = excluded.lease_until
    returning process_id
  )
  select pg_notify($3, $4) from renewed`;
const RELEASE = 'delete from cache_peers where process_id = $1';
const FORGET_OLD_LEASES = `delete from cache_peers where lease_until < now() - interval '1 hour'`;
/**
 * The schema this process's tables are in, as its search path finds them (not always
 * `current_schema()`: that is the path's first schema that exists, which may be an empty schema
 * of the role's own, with the tables further along), and the tables there whose writes notify.
 * The triggers' notices name the table's schema, so a process that took another one for its own
 * would ignore every change. Before migration 016 (no cache_peers yet): `current_schema()`.
 */
const NOTIFYING_TABLES = `select n.nspname as schema,
    array(select c.relname::text from pg_trigger t join pg_class c on c.oid = t.tgrelid
      where t.tgname = 'atrium_changes' and c.relnamespace = n.oid) as tables
  from pg_namespace n
  where n.oid = coalesce(
    (select relnamespace from pg_class where oid = to_regclass('cache_peers')),
    (select oid from pg_namespace where nspname = current_schema()))`;

/** Kysely's own transaction statements (PostgresDriver), told apart from writes. */
function transactionCommand(query: CompiledQuery): 'begin' | 'commit' | 'rollback' | 'savepoint' | undefined {
  if (query.query.kind !== 'RawNode') return undefined;
  const text = query.sql.trimStart().toLowerCase();
  if (text === 'begin' || text.startsWith('start transaction')) return 'begin';
  if (text === 'commit') return 'commit';
  if (text === 'rollback') return 'rollback';
  if (/^(savepoint|release|rollback to)\b/.test(text)) return 'savepoint';
  return undefined;
}

/** The tables a statement writes, or undefined for a read. */
function writes(query: CompiledQuery): WrittenTables | undefined {
  const node = query.query;
  if (node.kind === 'SelectQueryNode' && !node.with) return undefined;
  const tables = writtenTables(node);
  return tables !== 'unknown' && tables.size === 0 ? undefined : tables;
}

function joined(a: WrittenTables | undefined, b: WrittenTables): WrittenTables {
  if (a === undefined) return b;
  if (a === 'unknown' || b === 'unknown') return 'unknown';
  return new Set([...a, ...b]);
}
