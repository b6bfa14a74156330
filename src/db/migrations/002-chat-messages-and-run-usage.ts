import { type Kysely, sql } from 'kysely';

const TS = 'text';
const FLOAT = 'double precision';

/**
 * Message ids come from clients (`useChat` generates them), so they are unique per chat, not
 * globally: two chats may both hold a message "m1". The table is rebuilt with the key
 * (chat_id, id) because SQLite cannot change a primary key in place. Agent runs record their
 * own token usage and cost.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('messages_v2')
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('chat_id', 'text', (c) => c.notNull().references('chats.id').onDelete('cascade'))
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('parts', 'text', (c) => c.notNull())
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('model', 'text')
    .addColumn('input_tokens', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('output_tokens', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('cost_usd', FLOAT, (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', TS, (c) => c.notNull())
    .addPrimaryKeyConstraint('messages_v2_pk', ['chat_id', 'id'])
    .addUniqueConstraint('messages_v2_chat_position_uq', ['chat_id', 'position'])
    .execute();
  await sql`insert into messages_v2 (id, chat_id, workspace_id, role, parts, position, model, input_tokens, output_tokens, cost_usd, created_at)
    select id, chat_id, workspace_id, role, parts, position, model, input_tokens, output_tokens, cost_usd, created_at from messages`.execute(
    db,
  );
  await db.schema.dropTable('messages').execute();
  await db.schema.alterTable('messages_v2').renameTo('messages').execute();

  await db.schema
    .alterTable('agent_runs')
    .addColumn('input_tokens', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('agent_runs')
    .addColumn('output_tokens', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('agent_runs')
    .addColumn('cost_usd', FLOAT, (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createIndex('agent_runs_agent_idx')
    .on('agent_runs')
    .columns(['agent_id', 'created_at'])
    .execute();
  await db.schema
    .createIndex('chats_workspace_idx')
    .on('chats')
    .columns(['workspace_id', 'updated_at'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('chats_workspace_idx').execute();
  await db.schema.dropIndex('agent_runs_agent_idx').execute();
  await db.schema.alterTable('agent_runs').dropColumn('cost_usd').execute();
  await db.schema.alterTable('agent_runs').dropColumn('output_tokens').execute();
  await db.schema.alterTable('agent_runs').dropColumn('input_tokens').execute();
}
