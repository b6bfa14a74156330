import {
  accessChats,
  type ChatsDeps,
  deleteChat,
  getChat,
  listChats,
  listMessages,
  renameChat,
} from '../../services/chats.js';
import { sendJsonBody } from '../json-reply.js';
import { requestedWorkspaceId } from '../plugins/auth.js';
import {
  ChatListQuery,
  ChatListResponse,
  ChatParams,
  ChatResponse,
  DeletedResponse,
  MessageListQuery,
  MessageListResponse,
  RenameChatBody,
} from '../schemas/chats.js';
import {
  API_KEY_SECURITY,
  COMMON_ERRORS,
  errorResponses,
  PATCH_BODY_TYPES,
  WorkspaceHeader,
} from '../schemas/common.js';
import { registerMergePatchRoutes } from '../json-body.js';
import type { TypedApp } from '../typed-app.js';

const CHAT_PAGE = { defaultLimit: 20, maxLimit: 100 };
const MESSAGE_PAGE = { defaultLimit: 100, maxLimit: 500 };

const VISIBILITY =
  "Owner and admin keys see every chat of the workspace, member keys the chats their user created; an organization key reads the workspace named in `x-workspace-id` with its user's role there.";

/** The chat history API (spec/chats.md): list, read, rename, delete chats and read their messages. */
export async function chatsRoutes(app: TypedApp, deps: ChatsDeps): Promise<void> {
  const access = (request: Parameters<typeof requestedWorkspaceId>[0]) =>
    accessChats(deps.db, request.principal, requestedWorkspaceId(request));

  app.get(
    '/chats',
    {
      schema: {
        summary: 'List chats',
        operationId: 'listChats',
        description: `Most recently updated first, then id; paged by cursor. ${VISIBILITY} Filters that name unknown ids simply match nothing.`,
        tags: ['chats'],
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        querystring: ChatListQuery,
        response: { 200: ChatListResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request, reply) => {
      const { limit, ...query } = request.query;
      const data = await listChats(deps, await access(request), {
        ...query,
        limit: Math.min(limit ?? CHAT_PAGE.defaultLimit, CHAT_PAGE.maxLimit),
      });
      return sendJsonBody(reply, data);
    },
  );

  app.get(
    '/chats/:chatId',
    {
      schema: {
        summary: 'Get a chat',
        operationId: 'getChat',
        description: `\`chatId\` may be the chat's \`clientId\`. ${VISIBILITY}`,
        tags: ['chats'],
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: ChatParams,
        response: { 200: ChatResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => ({
      data: { chat: await getChat(deps, await access(request), request.params.chatId) },
    }),
  );

  await registerMergePatchRoutes(app, (scope) => {
    scope.patch(
      '/chats/:chatId',
      {
        schema: {
          summary: 'Rename a chat',
          operationId: 'renameChat',
          description:
            "`title` is trimmed, then 1–100 characters on one line (a control character within it is a 400). `chatId` may be the chat's `clientId`. Members rename the chats their user created; owners and admins any chat of the workspace.",
          tags: ['chats'],
          security: API_KEY_SECURITY,
          headers: WorkspaceHeader,
          params: ChatParams,
          consumes: PATCH_BODY_TYPES,
          body: RenameChatBody,
          response: { 200: ChatResponse, ...errorResponses(...COMMON_ERRORS) },
        },
      },
      async (request) => ({
        data: {
          chat: await renameChat(deps, await access(request), request.params.chatId, request.body.title),
        },
      }),
    );
  });

  app.delete(
    '/chats/:chatId',
    {
      schema: {
        summary: 'Delete a chat',
        operationId: 'deleteChat',
        description:
          'Stops a reply in progress, then deletes the chat and its messages; a second delete is 404. Usage already counted stays counted; agent runs keep their `chatId`.',
        tags: ['chats'],
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: ChatParams,
        response: { 200: DeletedResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => {
      await deleteChat(deps, await access(request), request.params.chatId);
      return { data: { deleted: true } };
    },
  );

  app.get(
    '/chats/:chatId/messages',
    {
      schema: {
        summary: "List a chat's messages",
        operationId: 'listChatMessages',
        description:
          'The latest messages before `cursor` (default: the newest), oldest first, as UI messages (`id`, `role`, `parts`, `metadata`): the first page can be given to `useChat({ messages })` as it is. `nextCursor` pages further back. A page holds at most `limit` messages and stops before the message that would take its stored parts past 16 MiB (`ATRIUM_MESSAGE_PAGE_BYTES`; it always holds at least one), so a page of a chat with large parts may hold fewer than `limit` while `hasMore` is true.',
        tags: ['chats'],
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: ChatParams,
        querystring: MessageListQuery,
        response: { 200: MessageListResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request, reply) => {
      const { limit, cursor } = request.query;
      const body = await listMessages(deps, await access(request), request.params.chatId, {
        cursor,
        limit: Math.min(limit ?? MESSAGE_PAGE.defaultLimit, MESSAGE_PAGE.maxLimit),
      });
      return sendJsonBody(reply, body);
    },
  );
}
