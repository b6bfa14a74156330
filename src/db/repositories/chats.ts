import { sql } from 'kysely';
import { type Db, dialectOf, type Executor } from '../database.js';
import { type JsonField, jsonArray } from '../json-page.js';
import { listingCache } from '../listing-cache.js';
import { preparedSelect } from '../prepared.js';
import type { ChatTable } from '../schema.js';
import { idInCodePointOrder } from '../sort-key.js';

/** A chat of the workspace by its id or its client id, or undefined. */
export function findChat(db: Executor, workspaceId: string, chatIdOrClientId: string) {
  return (
    db
      .selectFrom('chats')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where((eb) => eb.or([eb('id', '=', chatIdOrClientId), eb('client_id', '=', chatIdOrClientId)]))
      // An Atrium id wins over a client id that happens to equal it.
      .orderBy(sql`case when id = ${chatIdOrClientId} then 0 else 1 end`)
      .limit(1)
      .executeTakeFirst()
  );
}

export async function insertChat(db: Executor, chat: ChatTable): Promise<void> {
  await db.insertInto('chats').values(chat).execute();
}

/**
 * Counts messages stored in a chat and adds the reply's cost; false when the chat is gone
 * (deleted while a reply ran). Locks the chat row, so concurrent turns write in turn.
 */
export async function recordChatMessages(
  db: Executor,
  chatId: string,
  change: { added: number; costUsd: number; now: string },
): Promise<boolean> {
  const result = await db
    .updateTable('chats')
    .set({
      spend_usd: sql<number>`spend_usd + ${change.costUsd}`,
      message_count: sql<number>`message_count + ${change.added}`,
      ...(change.added > 0 ? { last_message_at: change.now } : {}),
      updated_at: change.now,
    })
    .where('id', '=', chatId)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** Keeps the message count true after messages were removed (regenerate). */
export async function recountChatMessages(db: Executor, chatId: string): Promise<void> {
  await db
    .updateTable('chats')
    .set({
      message_count: sql<number>`(select count(*) from messages where messages.chat_id = ${chatId})`,
    })
    .where('id', '=', chatId)
    .execute();
}

export interface ChatListQuery {
  workspaceId: string;
  /** Only chats this user created (a member's view); undefined: every chat. */
  createdBy?: string;
  agentId?: string;
  /** Only chats of these agents (a session token limited to them); undefined: any agent. */
  agentIds?: string[];
  projectId?: string;
  user?: string;
  /** Keyset position: chats strictly after (updated_at desc, id desc in code point order). */
  after?: { updatedAt: string; id: string };
  limit: number;
}

/** The chats a listing matches, before paging. */
function matchingChats(db: Executor, query: ChatListQuery) {
  let select = db.selectFrom('chats').where('workspace_id', '=', query.workspaceId);
  if (query.createdBy !== undefined) select = select.where('created_by', '=', query.createdBy);
  if (query.agentId !== undefined) select = select.where('agent_id', '=', query.agentId);
  if (query.agentIds !== undefined) select = select.where('agent_id', 'in', query.agentIds);
  if (query.projectId !== undefined) select = select.where('project_id', '=', query.projectId);
  if (query.user !== undefined) select = select.where('end_user', '=', query.user);
  // Ids in code point order in the cursor as in the order (sort-key.ts), whatever the database's locale.
  const id = idInCodePointOrder(db);
  const after = query.after;
  if (after) {
    select = select.where((eb) =>
      eb.or([
        eb('updated_at', '<', after.updatedAt),
        eb.and([eb('updated_at', '=', after.updatedAt), eb(id, '<', after.id)]),
      ]),
    );
  }
  return select.orderBy('updated_at', 'desc').orderBy(id, 'desc');
}

/**
 * The fields of a listed chat, in the response's order (`chatView`). `active` is written false:
 * whether a reply runs is not in the database (the caller sets it, see listChats).
 */
const CHAT_FIELDS: Record<string, JsonField> = {
  id: 'value',
  clientId: 'value',
  title: 'value',
  agentId: 'value',
  projectId: 'value',
  createdBy: 'value',
  user: 'value',
  messageCount: 'value',
  lastMessageAt: 'value',
  active: 'boolean',
  spendUsd: 'usd',
  createdAt: 'value',
  updatedAt: 'value',
};

/** Where a listed chat sits in the order: what a page's cursor is made of. */
export interface ChatPosition {
  id: string;
  updatedAt: string;
}

/**
 * Chats, most recently updated first, then id (code point order): the page as JSON text, with the positions of up
 * to `limit + 1` matching chats (the extra one tells whether more follow; the last of the page is
 * the next cursor's position). Both are kept in the listing cache, the positions already parsed:
 * callers must not change them.
 */
export async function listChatsJson(
  db: Db,
  query: ChatListQuery,
  dataVersion?: number,
): Promise<{ page: string; keys: readonly ChatPosition[] }> {
  return chatPages(db, JSON.stringify(query), () => readChatsJson(db, query), dataVersion);
}

/** Deleting an agent deletes its chats; deleting a project sets their projectId to null. */
const chatPages = listingCache<{ page: string; keys: readonly ChatPosition[] }>([
  'chats',
  'agents',
  'projects',
]);

async function readChatsJson(db: Db, query: ChatListQuery): Promise<{ page: string; keys: ChatPosition[] }> {
  const [row] = await chatsPage(db, { ...query, withNext: query.limit + 1 });
  return { page: row!.page, keys: JSON.parse(row!.keys) as ChatPosition[] };
}

/** One statement: `page`, the JSON array of up to `limit` chats, and `keys`, up to `withNext` positions. */
const chatsPage = preparedSelect((db, query: ChatListQuery & { withNext: number }) => {
  const dialect = dialectOf(db);
  const rows = matchingChats(db, query)
    .select([
      'id',
      'client_id as clientId',
      'title',
      'agent_id as agentId',
      'project_id as projectId',
      'created_by as createdBy',
      'end_user as user',
      'message_count as messageCount',
      'last_message_at as lastMessageAt',
      sql<number>`0`.as('active'),
      'spend_usd as spendUsd',
      'created_at as createdAt',
      'updated_at as updatedAt',
    ])
    .limit(query.limit);
  const keys = matchingChats(db, query).select(['id', 'updated_at as updatedAt']).limit(query.withNext);
  return db.selectNoFrom([
    jsonArray(dialect, rows, CHAT_FIELDS).as('page'),
    jsonArray(dialect, keys, { id: 'value', updatedAt: 'value' }).as('keys'),
  ]);
});

export async function renameChat(db: Executor, chatId: string, title: string, now: string) {
  await db.updateTable('chats').set({ title, updated_at: now }).where('id', '=', chatId).execute();
}

/** Deletes a chat and its messages; false when it was already gone. */
export async function deleteChat(db: Executor, workspaceId: string, chatId: string): Promise<boolean> {
  await db
    .deleteFrom('messages')
    .where('chat_id', '=', chatId)
    .where('workspace_id', '=', workspaceId)
    .execute();
  const result = await db
    .deleteFrom('chats')
    .where('id', '=', chatId)
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}
