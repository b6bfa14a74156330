import { type Kysely, PostgresAdapter, sql } from 'kysely';

/**
 * Limits that hold across processes: per-key request counts in fixed windows (when Redis does
 * not count them), and the usage reserved by model requests in flight, so that concurrent
 * requests are admitted against what is already promised, not only what is already spent.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // Written on every request and worthless after a minute: on PostgreSQL the table is UNLOGGED,
  // so an increment commits without a WAL flush (a server crash merely forgets the counts).
  const unlogged = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable('rate_limit_counters')
    .$call((builder) => (unlogged ? builder.modifyFront(sql`unlogged`) : builder))
    .addColumn('key', 'text', (c) => c.notNull())
    // Epoch milliseconds of the window's start; windows are aligned, so every process agrees.
    .addColumn('window_start', 'bigint', (c) => c.notNull())
    .addColumn('count', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('rate_limit_counters_pk', ['key', 'window_start'])
    .execute();

  await db.schema
    .createTable('usage_reservations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('chat_id', 'text')
    // The process holding it keeps `expires_at` ahead while the request runs; a process that
    // dies stops doing so, and its reservations stop counting once they expire.
    .addColumn('process_id', 'text', (c) => c.notNull())
    .addColumn('tokens', 'integer', (c) => c.notNull())
    .addColumn('cost_usd', 'double precision', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('usage_reservations_workspace_idx')
    .on('usage_reservations')
    .columns(['workspace_id', 'expires_at'])
    .execute();
  await db.schema
    .createIndex('usage_reservations_process_idx')
    .on('usage_reservations')
    .column('process_id')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('usage_reservations').execute();
  await db.schema.dropTable('rate_limit_counters').execute();
}
