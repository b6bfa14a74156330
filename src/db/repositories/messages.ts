import { sql, type Transaction } from 'kysely';
import type { Executor } from '../database.js';
import { forEachChunk } from '../in-chunks.js';
import type { Database, MessageTable } from '../schema.js';

/** The messages of a chat, in order. */
export function listChatMessages(db: Executor, workspaceId: string, chatId: string) {
  return db
    .selectFrom('messages')
    .select(['id', 'role', 'parts', 'position'])
    .where('chat_id', '=', chatId)
    .where('workspace_id', '=', workspaceId)
    .orderBy('position')
    .execute();
}

/** Ids of the messages of a chat. */
export async function listChatMessageIds(
  db: Executor,
  workspaceId: string,
  chatId: string,
): Promise<Set<string>> {
  const rows = await db
    .selectFrom('messages')
    .select('id')
    .where('chat_id', '=', chatId)
    .where('workspace_id', '=', workspaceId)
    .execute();
  return new Set(rows.map((row) => row.id));
}

/** The role and position of the message stored in a chat under `id`, if any. */
export async function messageUnderId(
  trx: Transaction<Database>,
  chatId: string,
  id: string,
): Promise<{ role: string; position: number } | undefined> {
  const row = await trx
    .selectFrom('messages')
    .select(['role', 'position'])
    .where('chat_id', '=', chatId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row ? { role: row.role, position: Number(row.position) } : undefined;
}

/**
 * Appends messages after the chat's last one; run inside the transaction that writes them.
 * `firstPosition` skips the lookup when the caller knows it (0 for a chat created in the same
 * transaction).
 */
export async function appendMessages(
  trx: Transaction<Database>,
  chatId: string,
  rows: Array<Omit<MessageTable, 'position' | 'chat_id'>>,
  firstPosition?: number,
): Promise<void> {
  if (rows.length === 0) return;
  let start = firstPosition;
  if (start === undefined) {
    const last = await trx
      .selectFrom('messages')
      .select((eb) => eb.fn.max('position').as('position'))
      .where('chat_id', '=', chatId)
      .executeTakeFirst();
    start = last?.position === null || last?.position === undefined ? 0 : Number(last.position) + 1;
  }
  const positioned = rows.map((row, i) => ({ ...row, chat_id: chatId, position: start + i }));
  await forEachChunk(positioned, (chunk) => trx.insertInto('messages').values(chunk).execute());
}

/**
 * The positions and stored sizes (UTF-8 bytes of `parts`) of the latest `limit + 1` messages of a
 * chat before `beforePosition` (default: the newest), newest first: a page of messages chooses
 * its rows by these before it reads any parts. Both engines tell a value's size without
 * handing it over (PostgreSQL from its TOAST header).
 */
export function listChatMessageSizes(
  db: Executor,
  workspaceId: string,
  chatId: string,
  page: { beforePosition?: number; limit: number },
): Promise<Array<{ position: number; bytes: number }>> {
  let select = db
    .selectFrom('messages')
    .select(['position', sql<number>`octet_length(parts)`.as('bytes')])
    .where('chat_id', '=', chatId)
    .where('workspace_id', '=', workspaceId);
  if (page.beforePosition !== undefined) select = select.where('position', '<', page.beforePosition);
  return select
    .orderBy('position', 'desc')
    .limit(page.limit + 1)
    .execute();
}

/** The messages of a chat from position `first` to `last` (both included), oldest first. */
export function listChatMessagesBetween(
  db: Executor,
  workspaceId: string,
  chatId: string,
  first: number,
  last: number,
) {
  return db
    .selectFrom('messages')
    .selectAll()
    .where('chat_id', '=', chatId)
    .where('workspace_id', '=', workspaceId)
    .where('position', '>=', first)
    .where('position', '<=', last)
    .orderBy('position')
    .execute();
}

/** Deletes the given messages of a chat (the ones a regenerated reply replaces). */
export async function deleteChatMessages(
  trx: Transaction<Database>,
  chatId: string,
  messageIds: string[],
): Promise<void> {
  await forEachChunk(messageIds, (chunk) =>
    trx.deleteFrom('messages').where('chat_id', '=', chatId).where('id', 'in', chunk).execute(),
  );
}
