import { Type } from 'typebox';
import { envelope, Timestamp } from './common.js';

export const ChatObject = Type.Object(
  {
    id: Type.String({ examples: ['cht_8x2k…'] }),
    clientId: Type.Union([Type.String(), Type.Null()], {
      description: "The client's own id for the chat (`useChat`'s `id`), or null",
    }),
    title: Type.String(),
    agentId: Type.String(),
    projectId: Type.Union([Type.String(), Type.Null()]),
    createdBy: Type.Union([Type.String(), Type.Null()], {
      description: 'The user of the key that created the chat',
    }),
    user: Type.Union([Type.String(), Type.Null()], {
      description: 'The end user named in `systemVariables.user.id` when the chat was created',
    }),
    messageCount: Type.Integer({ minimum: 0 }),
    lastMessageAt: Type.Union([Timestamp, Type.Null()]),
    active: Type.Boolean({ description: 'True while a reply is being generated' }),
    spendUsd: Type.Number({
      description:
        'What the chat’s replies cost, to 1e-8 USD as every cost (counted against the spend cap unrounded)',
    }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { $id: 'Chat', title: 'Chat' },
);
const ChatRef = Type.Unsafe({ $ref: 'Chat#' });

export const CursorPagination = Type.Object({
  limit: Type.Integer(),
  hasMore: Type.Boolean(),
  nextCursor: Type.Union([Type.String(), Type.Null()], {
    description: 'Pass as `cursor` for the next page; null on the last page',
  }),
});

export const ChatParams = Type.Object({
  chatId: Type.String({ minLength: 1, maxLength: 200, description: "The chat's id or its `clientId`" }),
});

const Cursor = Type.Optional(
  Type.String({ minLength: 1, maxLength: 500, description: 'Opaque, from `pagination.nextCursor`' }),
);

export const ChatListQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({ minimum: 1, description: 'Page size, default 20; values above 100 are clamped to 100' }),
  ),
  cursor: Cursor,
  agentId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  projectId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  user: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 200,
      description: 'Chats of this end user (`systemVariables.user.id`)',
    }),
  ),
});

export const MessageListQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      description:
        'Page size, default 100; values above 500 are clamped to 500. A page also stops before its stored parts pass 16 MiB (`ATRIUM_MESSAGE_PAGE_BYTES`; it always holds at least one message), so it may hold fewer with `hasMore` true',
    }),
  ),
  cursor: Cursor,
});

export const RenameChatBody = Type.Object({
  // The length is the trimmed title's, so it is checked in renameChat, not here.
  title: Type.String({
    minLength: 1,
    description:
      'Trimmed, then 1–100 characters, at least one of which shows (not only invisible characters such as U+200B, marks or blank fillers such as U+3164: "must not be blank"); one line: a control character (newline, tab) within it is a 400',
  }),
});

export const ChatListResponse = envelope(
  Type.Object({ chats: Type.Array(ChatRef), pagination: CursorPagination }),
  'A page of chats',
);
export const ChatResponse = envelope(Type.Object({ chat: ChatRef }), 'The chat');
export const DeletedResponse = envelope(Type.Object({ deleted: Type.Boolean() }), 'Deleted');

export const StoredMessage = Type.Object({
  id: Type.String(),
  role: Type.Union([Type.Literal('user'), Type.Literal('assistant'), Type.Literal('system')]),
  parts: Type.Array(Type.Object({ type: Type.String() }, { additionalProperties: true })),
  metadata: Type.Object({
    createdAt: Timestamp,
    model: Type.Optional(Type.String()),
    usage: Type.Optional(Type.Object({ inputTokens: Type.Integer(), outputTokens: Type.Integer() })),
    costUsd: Type.Optional(Type.Number({ description: 'The reply’s cost, to 1e-8 USD' })),
    finishReason: Type.Optional(
      Type.String({
        description:
          '`stop`, `length`, `tool-calls`, `stopped`, `interrupted`, `error` (the provider failed the reply after this output), …',
      }),
    ),
  }),
});

export const MessageListResponse = envelope(
  Type.Object({
    messages: Type.Array(StoredMessage, {
      description: 'Oldest first: a page `useChat({ messages })` takes as is',
    }),
    pagination: CursorPagination,
  }),
  'A page of the chat’s messages, oldest first',
);

export const StopResponse = envelope(
  Type.Object({
    stopped: Type.Boolean(),
    messageId: Type.Union([Type.String(), Type.Null()], { description: 'The stopped reply' }),
  }),
  'Whether a reply was running and is now stopped',
);
