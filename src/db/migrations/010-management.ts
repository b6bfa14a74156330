import { type Kysely, SqliteAdapter, sql } from 'kysely';

/**
 * Management over the API (management.md): who manages each agent, project and key; session
 * tokens (stored as keys of kind `session`, with the agents they are limited to); the user a
 * run was made for; and the indexes the usage report and run listing read by.
 *
 * Existing rows: agents and keys could only come from the setup file or the operator's CLI, so
 * they are `setup`. A project may have come from either, which the database cannot tell: it is
 * left unclaimed (null), which the API treats as its own and the next `atrium apply` that
 * declares it claims without `--adopt`, so an upgrade never breaks a working deploy.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('agents')
    .addColumn('managed_by', 'text', (c) => c.notNull().defaultTo('setup'))
    .execute();
  await db.schema.alterTable('projects').addColumn('managed_by', 'text').execute();
  await db.schema
    .alterTable('api_keys')
    .addColumn('managed_by', 'text', (c) => c.notNull().defaultTo('setup'))
    .execute();
  await db.schema.alterTable('api_keys').addColumn('agent_ids', 'text').execute();
  await db.schema.alterTable('agent_runs').addColumn('user_id', 'text').execute();

  await createUsageRollup(db);
  await db.schema
    .createIndex('agent_runs_workspace_created_idx')
    .on('agent_runs')
    .columns(['workspace_id', 'created_at'])
    .execute();
  await sql`create index api_keys_workspace_idx on api_keys (workspace_id, kind)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('api_keys_workspace_idx').execute();
  await db.schema.dropIndex('agent_runs_workspace_created_idx').execute();
  await dropUsageRollup(db);
  await db.schema.alterTable('agent_runs').dropColumn('user_id').execute();
  await db.schema.alterTable('api_keys').dropColumn('agent_ids').execute();
  await db.schema.alterTable('api_keys').dropColumn('managed_by').execute();
  await db.schema.alterTable('projects').dropColumn('managed_by').execute();
  await db.schema.alterTable('agents').dropColumn('managed_by').execute();
}

const FLOAT = 'double precision';

/** Triggers are the one thing written per engine here; the dialect's adapter tells which. */
async function isSqlite(db: Kysely<unknown>): Promise<boolean> {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}

/**
 * The usage report reads a rollup by workspace, UTC day, agent and model instead of summing
 * messages (100,000 messages took 120–400 ms to sum; the rollup holds at most days × agents ×
 * models rows). A trigger keeps it in step with every model reply stored (an assistant message
 * with a model; messages a client sends have none), in the same transaction, whatever code
 * writes the message. Existing replies are counted once here.
 */
async function createUsageRollup(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('usage_daily')
    .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('date', 'text', (c) => c.notNull())
    .addColumn('agent_id', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('input_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('output_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('cost_usd', FLOAT, (c) => c.notNull().defaultTo(0))
    .addColumn('requests', 'bigint', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('usage_daily_pk', ['workspace_id', 'date', 'agent_id', 'model'])
    .execute();
  await sql`insert into usage_daily (workspace_id, date, agent_id, model, input_tokens, output_tokens, cost_usd, requests)
    select m.workspace_id, substr(m.created_at, 1, 10), c.agent_id, m.model,
      sum(m.input_tokens), sum(m.output_tokens), sum(m.cost_usd), count(*)
    from messages m join chats c on c.id = m.chat_id
    where m.role = 'assistant' and m.model is not null
    group by m.workspace_id, substr(m.created_at, 1, 10), c.agent_id, m.model`.execute(db);

  const upsert = sql`insert into usage_daily (workspace_id, date, agent_id, model, input_tokens, output_tokens, cost_usd, requests)
      select NEW.workspace_id, substr(NEW.created_at, 1, 10), c.agent_id, NEW.model,
        NEW.input_tokens, NEW.output_tokens, NEW.cost_usd, 1
      from chats c where c.id = NEW.chat_id
      on conflict (workspace_id, date, agent_id, model) do update set
        input_tokens = usage_daily.input_tokens + excluded.input_tokens,
        output_tokens = usage_daily.output_tokens + excluded.output_tokens,
        cost_usd = usage_daily.cost_usd + excluded.cost_usd,
        requests = usage_daily.requests + 1`;
  if (await isSqlite(db)) {
    await sql`create trigger messages_usage_rollup after insert on messages
      when NEW.role = 'assistant' and NEW.model is not null
      begin ${upsert}; end`.execute(db);
  } else {
    await sql`create function messages_usage_rollup() returns trigger language plpgsql as $$
      begin ${upsert}; return NEW; end $$`.execute(db);
    await sql`create trigger messages_usage_rollup after insert on messages for each row
      when (NEW.role = 'assistant' and NEW.model is not null)
      execute function messages_usage_rollup()`.execute(db);
  }
}

async function dropUsageRollup(db: Kysely<unknown>): Promise<void> {
  if (await isSqlite(db)) {
    await sql`drop trigger messages_usage_rollup`.execute(db);
  } else {
    await sql`drop trigger messages_usage_rollup on messages`.execute(db);
    await sql`drop function messages_usage_rollup()`.execute(db);
  }
  await db.schema.dropTable('usage_daily').execute();
}
