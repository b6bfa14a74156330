import { type Kysely, sql } from 'kysely';

/**
 * Chats that clients can hold (spec/chats.md): the client's own chat id (unique per
 * workspace), who created the chat and for which end user, the message count and time of the
 * last message for listings, and why each assistant message ended.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('chats').addColumn('client_id', 'text').execute();
  await db.schema.alterTable('chats').addColumn('created_by', 'text').execute();
  await db.schema.alterTable('chats').addColumn('end_user', 'text').execute();
  await db.schema
    .alterTable('chats')
    .addColumn('message_count', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('chats').addColumn('last_message_at', 'text').execute();
  await db.schema.alterTable('messages').addColumn('finish_reason', 'text').execute();
  // Both engines let several rows hold NULL in a unique index: chats without a client id.
  await db.schema
    .createIndex('chats_client_id_uq')
    .on('chats')
    .columns(['workspace_id', 'client_id'])
    .unique()
    .execute();
  await db.schema
    .createIndex('chats_creator_idx')
    .on('chats')
    .columns(['workspace_id', 'created_by', 'updated_at'])
    .execute();
  await sql`update chats set
      message_count = (select count(*) from messages where messages.chat_id = chats.id),
      last_message_at = (select max(created_at) from messages where messages.chat_id = chats.id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('chats_creator_idx').execute();
  await db.schema.dropIndex('chats_client_id_uq').execute();
  await db.schema.alterTable('messages').dropColumn('finish_reason').execute();
  for (const column of ['last_message_at', 'message_count', 'end_user', 'created_by', 'client_id']) {
    await db.schema.alterTable('chats').dropColumn(column).execute();
  }
}
