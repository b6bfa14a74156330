import { isBlankTitle, TITLE_MAX } from './chat-messages.js';
import { DEFAULT_MESSAGE_PAGE_BYTES } from '../config.js';
import { type Db, inReadSnapshot } from '../db/database.js';
import { jsonDataBody, jsonObjectText } from '../db/json-page.js';
import {
  type ChatPosition,
  deleteChat as deleteChatRow,
  findChat,
  listChatsJson,
  renameChat as renameChatRow,
} from '../db/repositories/chats.js';
import { listChatMessagesBetween, listChatMessageSizes } from '../db/repositories/messages.js';
import { listingCache } from '../db/listing-cache.js';
import type { ChatTable, MessageTable } from '../db/schema.js';
import { errors } from '../errors.js';
import { isStorableText } from '../text.js';
import { type Clock, isStoredTimestamp } from '../ids.js';
import { accessRequestWorkspace, type Principal } from './access.js';
import { canSeeChat, type ChatViewer, chatViewer } from './chat-visibility.js';
import type { RunningReplies } from './running-replies.js';
import { shownUsd } from '../models/registry.js';

export interface ChatsDeps {
  db: Db;
  clock: Clock;
  replies: RunningReplies;
  /**
   * A page of messages stops before the message that would take its stored parts past this
   * (`Config.messagePageBytes`; default `DEFAULT_MESSAGE_PAGE_BYTES`), and holds at least one.
   */
  messagePageBytes?: number;
}

/** The workspace whose chats a request reads, and what the caller may see there. */
export interface ChatsAccess {
  workspaceId: string;
  viewer: ChatViewer;
  /** The data_version the request read at authentication (`Principal.dataVersion`). */
  dataVersion?: number;
}

/** `/chats…` and `/chat/{chatId}/…`: the key's workspace, or the one an organization key names. */
export async function accessChats(
  db: Db,
  principal: Principal,
  headerWorkspaceId: string | undefined,
): Promise<ChatsAccess> {
  const access = await accessRequestWorkspace(db, principal, headerWorkspaceId);
  return {
    workspaceId: access.workspaceId,
    viewer: chatViewer(principal.userId, access.role, principal.agentIds),
    dataVersion: principal.dataVersion,
  };
}

export interface ChatView {
  id: string;
  clientId: string | null;
  title: string;
  agentId: string;
  projectId: string | null;
  createdBy: string | null;
  user: string | null;
  messageCount: number;
  lastMessageAt: string | null;
  active: boolean;
  spendUsd: number;
  createdAt: string;
  updatedAt: string;
}

function chatView(chat: ChatTable, active: boolean): ChatView {
  return {
    id: chat.id,
    clientId: chat.client_id,
    title: chat.title,
    agentId: chat.agent_id,
    projectId: chat.project_id,
    createdBy: chat.created_by,
    user: chat.end_user,
    messageCount: Number(chat.message_count),
    lastMessageAt: chat.last_message_at,
    active,
    spendUsd: shownUsd(Number(chat.spend_usd)),
    createdAt: chat.created_at,
    updatedAt: chat.updated_at,
  };
}

/** A chat the caller can see, by id or client id; 404 otherwise. */
export async function visibleChat(db: Db, access: ChatsAccess, chatId: string): Promise<ChatTable> {
  const chat = await findChat(db, access.workspaceId, chatId);
  if (!chat || !canSeeChat(access.viewer, chat)) throw errors.notFound('Chat');
  return chat;
}

/** Cursors are opaque to clients: base64url JSON of the keyset position. */
function encodeCursor(position: unknown[]): string {
  return Buffer.from(JSON.stringify(position)).toString('base64url');
}

/**
 * A cursor's values reach SQL as parameters: text PostgreSQL cannot hold (NUL) or a number past
 * the 32-bit `position` column would be the database's error (a 500) rather than the client's,
 * and SQLite would answer them a page. No cursor this API gave out holds either.
 */
const MAX_POSITION = 2 ** 31 - 1;
const isPosition = (value: unknown) =>
  Number.isSafeInteger(value) && (value as number) >= 0 && (value as number) <= MAX_POSITION;

function decodeCursor(cursor: string, check: (value: unknown[]) => boolean): unknown[] {
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(value) && check(value)) return value;
  } catch {
    // reported below
  }
  throw errors.badRequest('query.cursor is not a cursor this API gave out', [
    { path: 'query.cursor', message: 'is malformed' },
  ]);
}

export interface ChatListRequest {
  limit: number;
  cursor?: string;
  agentId?: string;
  projectId?: string;
  user?: string;
}

/**
 * A page of chats: the listing's response body (its UTF-8 bytes), its `data` built by the database (each chat as
 * `chatView`). Whether a reply runs is known here, not there: the page is rewritten only when
 * one of its chats has one.
 */
export async function listChats(
  deps: ChatsDeps,
  access: ChatsAccess,
  request: ChatListRequest,
): Promise<Buffer> {
  const after = request.cursor
    ? decodeCursor(request.cursor, (v) => v.length === 2 && isStoredTimestamp(v[0]) && isStorableText(v[1]))
    : undefined;
  const answer = await listChatsJson(
    deps.db,
    {
      workspaceId: access.workspaceId,
      createdBy: access.viewer.seesAll ? undefined : access.viewer.userId,
      agentIds: access.viewer.agentIds ?? undefined,
      agentId: request.agentId,
      projectId: request.projectId,
      user: request.user,
      after: after ? { updatedAt: after[0] as string, id: after[1] as string } : undefined,
      limit: request.limit,
    },
    access.dataVersion,
  );
  const listing = chatListing(answer, request.limit);
  const active = await deps.replies.activeChats(listing.ids);
  if (active.size === 0) return listing.idleBody;
  return listingBody(markActive(answer.page, active), listing.pagination);
}

interface ChatListing {
  ids: string[];
  pagination: string;
  /** The whole response body while none of the chats has a reply running. */
  idleBody: Buffer;
}

/**
 * What a page of the listing answers besides its chats' `active`, built once per page the
 * listing cache keeps (the answer object is the cached one until the data changes; its
 * cache key holds the limit), rather than on every request (issue 16).
 */
const chatListings = new WeakMap<object, ChatListing>();

function chatListing(answer: { page: string; keys: readonly ChatPosition[] }, limit: number): ChatListing {
  let listing = chatListings.get(answer);
  if (!listing) {
    const hasMore = answer.keys.length > limit;
    const listed = answer.keys.slice(0, limit);
    const last = listed[listed.length - 1];
    const pagination = JSON.stringify({
      limit,
      hasMore,
      nextCursor: hasMore && last ? encodeCursor([last.updatedAt, last.id]) : null,
    });
    listing = {
      ids: listed.map((chat) => chat.id),
      pagination,
      idleBody: listingBody(answer.page, pagination),
    };
    chatListings.set(answer, listing);
  }
  return listing;
}

function listingBody(chats: string, pagination: string): Buffer {
  return jsonDataBody(jsonObjectText({ chats, pagination }));
}

function markActive(page: string, active: Set<string>): string {
  const chats = JSON.parse(page) as ChatView[];
  for (const chat of chats) chat.active = active.has(chat.id);
  return JSON.stringify(chats);
}

export async function getChat(deps: ChatsDeps, access: ChatsAccess, chatId: string): Promise<ChatView> {
  const chat = await visibleChat(deps.db, access, chatId);
  return chatView(chat, await deps.replies.isActive(chat.id));
}

/**
 * Why a trimmed title cannot be a chat's title, or null. A title is one line, as the ones made from
 * the first message are (whitespace collapsed): a newline or tab within it is refused, not stored
 * for every list to show. The limit counts characters (code points) of what is stored.
 */
function renamedTitleProblem(trimmed: string): string | null {
  if (isBlankTitle(trimmed)) return 'must not be blank';
  if (/\p{Cc}/u.test(trimmed)) return 'must not contain control characters (newlines, tabs)';
  if ([...trimmed].length > TITLE_MAX) return `must be at most ${TITLE_MAX} characters (after trimming)`;
  return null;
}

export async function renameChat(
  deps: ChatsDeps,
  access: ChatsAccess,
  chatId: string,
  title: string,
): Promise<ChatView> {
  const chat = await visibleChat(deps.db, access, chatId);
  const trimmed = title.trim();
  const problem = renamedTitleProblem(trimmed);
  if (problem) throw errors.badRequest(`body.title ${problem}`, [{ path: 'body.title', message: problem }]);
  await renameChatRow(deps.db, chat.id, trimmed, deps.clock().toISOString());
  return getChat(deps, access, chat.id);
}

/** Stops a reply in progress, then deletes the chat and its messages. */
export async function deleteChat(deps: ChatsDeps, access: ChatsAccess, chatId: string): Promise<void> {
  const chat = await visibleChat(deps.db, access, chatId);
  await deps.replies.stop(chat.id, 'deleted');
  if (!(await deleteChatRow(deps.db, access.workspaceId, chat.id))) throw errors.notFound('Chat');
}

export interface MessageView {
  id: string;
  role: MessageTable['role'];
  /** UI message parts as stored (each was checked to have a `type` when it came in). */
  parts: Array<{ type: string }>;
  metadata: {
    createdAt: string;
    model?: string;
    usage?: { inputTokens: number; outputTokens: number };
    costUsd?: number;
    finishReason?: string;
  };
}

function messageView(row: MessageTable): MessageView {
  let parts: MessageView['parts'] = [];
  try {
    const parsed = JSON.parse(row.parts) as unknown;
    if (Array.isArray(parsed)) parts = parsed as MessageView['parts'];
  } catch {
    // A row that is not JSON shows no parts rather than failing the whole page.
  }
  return {
    id: row.id,
    role: row.role,
    parts,
    metadata:
      row.role === 'assistant'
        ? {
            createdAt: row.created_at,
            ...(row.model ? { model: row.model } : {}),
            usage: { inputTokens: Number(row.input_tokens), outputTokens: Number(row.output_tokens) },
            costUsd: shownUsd(Number(row.cost_usd)),
            ...(row.finish_reason ? { finishReason: row.finish_reason } : {}),
          }
        : { createdAt: row.created_at },
  };
}

/**
 * Pages of messages kept as their response body, exactly on SQLite (src/db/listing-cache.ts): a
 * chat read again while none of its messages changed is answered without reading, parsing and
 * serializing 200 rows (issue 16). Deleting a chat, or the agent its chats belong to, deletes
 * its messages. Whether the caller may see the chat is checked on every request.
 */
const messagePages = listingCache(['messages', 'chats', 'agents']);

/**
 * The latest messages before the cursor, oldest first (what `useChat({ messages })` takes), as
 * the response body's UTF-8 bytes.
 */
export async function listMessages(
  deps: ChatsDeps,
  access: ChatsAccess,
  chatId: string,
  request: { limit: number; cursor?: string },
): Promise<Buffer> {
  const chat = await visibleChat(deps.db, access, chatId);
  const before = request.cursor
    ? decodeCursor(request.cursor, (v) => v.length === 1 && isPosition(v[0]))
    : undefined;
  const beforePosition = before ? (before[0] as number) : undefined;
  const maxBytes = deps.messagePageBytes ?? DEFAULT_MESSAGE_PAGE_BYTES;
  const key = JSON.stringify([access.workspaceId, chat.id, beforePosition ?? null, request.limit, maxBytes]);
  return messagePages(
    deps.db,
    key,
    () =>
      readMessagePage(deps.db, access.workspaceId, chat.id, {
        beforePosition,
        limit: request.limit,
        maxBytes,
      }),
    access.dataVersion,
  );
}

/**
 * A page holds at most `limit` messages and stops before the one that would take its stored
 * parts past `maxBytes` (always holding one): a chat grown turn by turn, each turn sending only
 * its new message, may store more than one response, or one JavaScript string, can hold. The
 * sizes are read first, so the parts of messages the page leaves out are never read. Both reads
 * see one snapshot: a regenerate or a turn committed between them put other messages (of other
 * sizes, at the positions read) into the page, which then passed its budget or came out short.
 */
async function readMessagePage(
  db: Db,
  workspaceId: string,
  chatId: string,
  { beforePosition, limit, maxBytes }: { beforePosition?: number; limit: number; maxBytes: number },
): Promise<Buffer> {
  const { page, hasMore, oldest } = await inReadSnapshot(db, async (trx) => {
    const sizes = await listChatMessageSizes(trx, workspaceId, chatId, { beforePosition, limit });
    let count = 0;
    let bytes = 0;
    for (const message of sizes.slice(0, limit)) {
      bytes += Number(message.bytes);
      if (count > 0 && bytes > maxBytes) break;
      count++;
    }
    const newest = sizes[0];
    const oldest = sizes[count - 1];
    const page =
      newest && oldest
        ? await listChatMessagesBetween(
            trx,
            workspaceId,
            chatId,
            Number(oldest.position),
            Number(newest.position),
          )
        : [];
    return { page, hasMore: sizes.length > count, oldest };
  });
  return jsonDataBody(
    JSON.stringify({
      messages: page.map(messageView),
      pagination: {
        limit,
        hasMore,
        nextCursor: hasMore && oldest ? encodeCursor([Number(oldest.position)]) : null,
      },
    }),
  );
}

/**
 * Stops the chat's reply and answers once it is stored and released (`settled`; false when that
 * took longer than the bound, and the stop answers anyway): spec/chats.md, "Stop".
 */
export async function stopReply(deps: ChatsDeps, access: ChatsAccess, chatId: string) {
  const chat = await visibleChat(deps.db, access, chatId);
  return deps.replies.stopAndWait(chat.id);
}

/**
 * The reply being generated for the chat, replayed from its start; null when none is. A chat id
 * that names no chat yet is null too, not 404: `useChat({ resume: true })` asks on every page
 * load, also for the new chat it has just named with its own id. A chat the key cannot see is 404.
 */
export async function resumeReply(deps: ChatsDeps, access: ChatsAccess, chatId: string) {
  const found = await findChat(deps.db, access.workspaceId, chatId);
  if (!found) return null;
  const chat = await visibleChat(deps.db, access, found.id);
  const stream = await deps.replies.resume(chat.id);
  return stream ? { chatId: chat.id, stream } : null;
}
