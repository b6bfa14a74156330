import type { CompiledQuery, DatabaseConnection, QueryResult } from 'kysely';
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

/**
 * How caches stay exact on PostgreSQL (src/db/exact-cache.ts, migration 016), without a round
 * trip per lookup:
 * - every write to a cached table notifies `atrium_changes` at commit (a trigger); each process
 *   listens on a connection of its own and empties the caches of that table at once;
 * - a process answers from memory only while it holds a lease in `cache_peers`, renewed every
 *   second over that same connection, which therefore still delivers notifications;
 * - a process that wrote a cached table through Kysely (a request, `atrium keys revoke`) waits,
 *   once its write has committed and before it goes on, until every process holding a lease has
 *   confirmed a barrier notified after the write. Notifications arrive in commit order, so the
 *   confirmation means the change was seen. A process that does not confirm is waited for until
 *   its lease ends, when it has stopped answering from memory on its own.
 * A key revoked or a project renamed through one process is thus refused or shown by every
 * other on its very next request, as on SQLite. The cost falls on writes (one query, and when
 * other processes hold leases a notification and their answers), not on reads.
 */
export class PgChangeSignals implements ChangeSignals {
  private readonly listeners = new Set<(tables: WrittenTables) => void>();
  private readonly processId = newId('prc');
  private readonly watched = new WeakSet<DatabaseConnection>();
  /** The listening connection, once connected; `listening` while it connects. */
  private client: pg.Client | undefined;
  private listening: Promise<pg.Client | undefined> | undefined;
  private schema: string | undefined;
  /** The tables whose writes notify (migration 016's triggers), read as the listener connects. */
  private notifying = new Set<string>();
  /** Whether the lease is wanted (a cache asked for a version), and its renewal timer. */
  private leasing = false;
  private renewal: NodeJS.Timeout | undefined;
  /** Until when (performance.now()) this process may answer from memory. */
  private validUntil = 0;
  /** The version while the lease holds: changed whenever it is (re)gained. */
  private epoch = 0;
  /** Versions handed out without a lease: each one new, so nothing is kept between lookups. */
  private unleased = -1;
  private barriers = 0;
  private readonly awaiting = new Map<number, { peers: Set<string>; done: () => void }>();
  private closed = false;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly connect: () => pg.Client) {}

  onWrite(listener: (tables: WrittenTables) => void): void {
    this.listeners.add(listener);
  }

  /** The lease's version while it holds; otherwise a new number on every call. */
  async externalVersion(): Promise<number> {
    if (!this.leasing) this.startLease();
    return performance.now() < this.validUntil ? this.epoch : this.unleased--;
  }

  /**
   * Reports the writes a pooled connection commits: the process's own caches are emptied once
   * the write is visible to the other connections (emptied before, a read on another connection
   * could keep the old rows), then the barrier. Installed on each connection as the pool makes it.
   */
  watch(connection: DatabaseConnection): void {
    if (this.watched.has(connection)) return;
    this.watched.add(connection);
    const execute = connection.executeQuery.bind(connection);
    let inTransaction = false;
    let written: WrittenTables | undefined;
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
          if (command === 'commit' && tables) await this.committed(tables);
        }
      }
      const result = await execute<R>(query);
      const tables = command === 'savepoint' ? undefined : writes(query);
      if (tables && inTransaction) written = joined(written, tables);
      else if (tables) await this.committed(tables);
      return result;
    };
  }

  private async committed(tables: WrittenTables): Promise<void> {
    for (const listener of this.listeners) listener(tables);
    if (tables === 'unknown' || tables.size > 0) await this.barrier(tables);
  }

  /**
   * Returns once every other process holding a lease has seen what this process committed so
   * far (or its lease has ended). Without other leases: at once, after one query.
   */
  private async barrier(tables: WrittenTables): Promise<void> {
    const client = await this.listen();
    if (!client) return this.waitOutLeases();
    // A schema change (a migration) may have added triggers.
    if (tables === 'unknown' || this.notifying.size === 0) await this.readNotifying(client).catch(() => {});
    // Tables no cache reads from (usage, rate limits, search chunks) notify nobody.
    if (tables !== 'unknown' && ![...tables].some((table) => this.notifying.has(table))) return;
    let peers: Array<{ process_id: string; ms: number }>;
    try {
      ({ rows: peers } = await this.query<{ process_id: string; ms: number }>(client, PEERS, [
        this.processId,
      ]));
    } catch (error) {
      // Before migration 016 (the migration itself, `atrium migrate`) no process holds a lease.
      if ((error as { code?: string }).code === UNDEFINED_TABLE) return;
      return this.waitOutLeases();
    }
    if (peers.length === 0) return;
    const n = ++this.barriers;
    const confirmed = new Promise<void>((done) =>
      this.awaiting.set(n, { peers: new Set(peers.map((peer) => peer.process_id)), done }),
    );
    let timer: NodeJS.Timeout | undefined;
    try {
      await this.query(client, NOTIFY, [CHANNEL, `barrier ${this.schema} ${this.processId} ${n}`]);
      const leasesEnd = Math.max(...peers.map((peer) => peer.ms)) + 100;
      await Promise.race([confirmed, new Promise((resolve) => (timer = setTimeout(resolve, leasesEnd)))]);
    } catch {
      await this.waitOutLeases();
    } finally {
      clearTimeout(timer);
      this.awaiting.delete(n);
    }
  }

  /** Without a listening connection, no confirmation can arrive: every lease ends within this. */
  private waitOutLeases(): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, LEASE_MS + 100));
  }

  private startLease(): void {
    this.leasing = true;
    const renew = () => void this.renew();
    renew();
    this.renewal = setInterval(renew, RENEW_MS);
    this.renewal.unref();
  }

  private async renew(): Promise<void> {
    const client = await this.listen();
    if (!client) return;
    const sentAt = performance.now();
    try {
      await this.query(client, RENEW, [this.processId, LEASE_MS]);
    } catch {
      return; // The lease runs out; caches are not used until a renewal succeeds.
    }
    if (client !== this.client) return;
    // Regained after a gap: what was kept before it is dropped.
    if (sentAt >= this.validUntil) this.epoch++;
    this.validUntil = sentAt + LEASE_MS - LEASE_MARGIN_MS;
  }

  /** The listening connection, connected on first use (undefined while it cannot connect). */
  private listen(): Promise<pg.Client | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    if (this.client) return Promise.resolve(this.client);
    this.listening ??= this.connectListener().finally(() => (this.listening = undefined));
    return this.listening;
  }

  private async connectListener(): Promise<pg.Client | undefined> {
    const client = this.connect();
    client.on('notification', (message) => this.notice(client, message.payload ?? ''));
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      const { rows } = await client.query<{ schema: string }>('select current_schema() as schema');
      this.schema = rows[0]!.schema;
      await this.readNotifying(client);
      await client.query(`listen ${CHANNEL}`);
    } catch {
      this.lost(client);
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS).unref());
      return undefined;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return undefined;
    }
    this.client = client;
    return client;
  }

  /** One query at a time on the listening connection (pg would queue them, deprecated). */
  private query<Row extends pg.QueryResultRow>(
    client: pg.Client,
    text: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<Row>> {
    const run = this.queue.then(() => client.query<Row>(text, values));
    this.queue = run.catch(() => {});
    return run;
  }

  private async readNotifying(client: pg.Client): Promise<void> {
    const { rows } = await this.query<{ table: string }>(client, NOTIFYING_TABLES);
    this.notifying = new Set(rows.map((row) => row.table));
  }

  private lost(client: pg.Client): void {
    if (this.client === client) {
      this.client = undefined;
      this.validUntil = 0;
    }
    void client.end().catch(() => {});
  }

  private notice(client: pg.Client, payload: string): void {
    const [kind, schema, ...rest] = payload.split(' ');
    if (schema !== this.schema) return;
    if (kind === 'change') {
      const tables = new Set([rest[0]!]);
      for (const listener of this.listeners) listener(tables);
    } else if (kind === 'barrier' && rest[0] !== this.processId) {
      // Every notification before it has been handled (they arrive in order): confirm.
      const answer = `confirm ${schema} ${rest[0]} ${rest[1]} ${this.processId}`;
      this.query(client, NOTIFY, [CHANNEL, answer]).catch(() => {});
    } else if (kind === 'confirm' && rest[0] === this.processId) {
      const waiting = this.awaiting.get(Number(rest[1]));
      waiting?.peers.delete(rest[2]!);
      if (waiting?.peers.size === 0) waiting.done();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.renewal);
    const client = this.client ?? (await this.listening);
    this.client = undefined;
    this.validUntil = 0;
    if (!client) return;
    if (this.leasing) await this.query(client, RELEASE, [this.processId]).catch(() => {});
    await client.end().catch(() => {});
  }
}

const UNDEFINED_TABLE = '42P01';
const NOTIFY = 'select pg_notify($1, $2)';
const PEERS = `select process_id, (extract(epoch from lease_until - now()) * 1000)::float8 as ms
  from cache_peers where lease_until > now() and process_id <> $1`;
const RENEW = `insert into cache_peers (process_id, lease_until)
  values ($1, now() + $2 * interval '1 millisecond')
  on conflict (process_id) do update set lease_until = excluded.lease_until`;
const NOTIFYING_TABLES = `select event_object_table as table from information_schema.triggers
  where trigger_name = 'atrium_changes' and trigger_schema = current_schema()`;
const RELEASE = 'delete from cache_peers where process_id = $1';

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
