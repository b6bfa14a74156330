import { type RawBuilder, sql, type Transaction } from 'kysely';
import { type Db, dialectOf, type Executor } from '../database.js';
import { forEachChunk } from '../in-chunks.js';
import type { Database, MessageTable } from '../schema.js';

/**
 * The messages of a chat, in order, each with only its parts of the given `types` (a JSON array
 * in the parts' order) once its parts pass WHOLE_PARTS_MAX_CHARS: the database drops the others
 * before they reach the process, so parts a caller never reads (for a turn: `data-*`, tools,
 * reasoning, up to 16 MB a message) cost it neither memory nor parsing. A smaller row comes whole
 * (the caller drops the other parts itself), and so does one the database cannot read as a
 * JSON array (see below). Runs on the database, not in a transaction, which PostgreSQL's failed
 * statement would end.
 */
export async function listChatMessagesWithParts(
  db: Db,
  workspaceId: string,
  chatId: string,
  types: readonly string[],
) {
  const select = (parts: RawBuilder<string>) =>
    db
      .selectFrom('messages')
      .select(['id', 'role', 'finish_reason', parts.as('parts')])
      .where('chat_id', '=', chatId)
      .where('workspace_id', '=', workspaceId)
      .orderBy('position')
      .execute();
  const wanted = sql.join(types.map((type) => sql`${type}`));
  const small = sql`length(parts) <= ${sql.lit(WHOLE_PARTS_MAX_CHARS)}`;
  if (dialectOf(db) === 'sqlite') {
    // What SQLite cannot read as a JSON array comes whole, for the caller to read as it always
    // did: text that is not JSON (json_each would fail the statement on it), and JSON nested past
    // SQLite's 1,000 levels (an MCP result's `structuredContent` can be), which json_valid calls
    // invalid and Node reads. An element's `type` is read from objects only (json_extract would
    // take a string element's value for JSON text, and fail on it).
    return select(sql<string>`case when ${small} or not json_valid(parts) or json_type(parts) <> 'array' then parts else (
      select json_group_array(json(part.value) order by part.key) from json_each(parts) as part
      where (case when part.type = 'object' then json_extract(part.value, '$.type') end) in (${wanted})
    ) end`);
  }
  // `json`, not `jsonb`: elements are handed on as they are stored (jsonb refuses \u0000). Cast
  // once (`offset 0` keeps PostgreSQL from copying the cast into each use, which parsed the text
  // twice); as text, since node-postgres would parse a `json` column.
  const kept = sql<string>`case when ${small} then parts else (select cast(case when json_typeof(p.j) = 'array' then (
      select coalesce(json_agg(part.value order by part.at), '[]')
      from json_array_elements(p.j) with ordinality as part(value, at)
      where part.value ->> 'type' in (${wanted})
    ) else '[]' end as text)
    from (select cast(parts as json) as j offset 0) as p) end`;
  try {
    return await select(kept);
  } catch (error) {
    // Text that is not JSON fails the cast, and PostgreSQL before 16 cannot test for it (only a
    // hand edit writes such a row); `->>` decodes every string of an element, and fails on a
    // `\u0000` in any of them (a tool's result can hold one). Such a chat is read whole, as it was
    // before: any data exception (SQLSTATE class 22) of the filter.
    if (!String((error as { code?: unknown }).code).startsWith(DATA_EXCEPTION_CLASS)) throw error;
    return select(sql<string>`parts`);
  }
}

/**
 * Parts up to this many characters come whole: filtering JSON in SQL costs more than reading it
 * (a 40-message chat of small parts: 380 against 170 µs on SQLite, 1.5 against 1.05 ms on
 * PostgreSQL), and a turn then holds at most this much of parts it never reads per message.
 */
export const WHOLE_PARTS_MAX_CHARS = 64 * 1024;

/**
 * PostgreSQL's SQLSTATE class of data exceptions: `22P02` text a type cannot read (`invalid
 * input syntax for type json`), `22P05` a `\u0000` that `->>` cannot decode, and their kin.
 */
const DATA_EXCEPTION_CLASS = '22';

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
