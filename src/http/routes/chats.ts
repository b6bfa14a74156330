import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import {
  accessChats,
  type ChatsDeps,
  deleteChat,
  getChat,
  listChats,
  listMessages,
  renameChat,
} from '../../services/chats.js';
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
import { API_KEY_SECURITY, COMMON_ERRORS, errorResponses } from '../schemas/common.js';

const CHAT_PAGE = { defaultLimit: 20, maxLimit: 100 };
const MESSAGE_PAGE = { defaultLimit: 100, maxLimit: 500 };

const workspaceHeader = {
  type: 'object',
  properties: {
    'x-workspace-id': {
      type: 'string',
      maxLength: 200,
      description: 'Required with an organization key: the workspace whose chats to read',
    },
  },
} as const;

const VISIBILITY =
  "Owner and admin keys see every chat of the workspace, member keys the chats their user created; an organization key reads the workspace named in `x-workspace-id` with its user's role there.";

/** The chat history API (spec/chats.md): list, read, rename, delete chats and read their messages. */
export async function chatsRoutes(app: FastifyInstance, deps: ChatsDeps): Promise<void> {
  const access = (request: Parameters<typeof requestedWorkspaceId>[0]) =>
    accessChats(deps.db, request.principal, requestedWorkspaceId(request));

  app.get<{ Querystring: Static<typeof ChatListQuery> }>(
    '/chats',
    {
      schema: {
        summary: 'List chats',
        description: `Most recently updated first, then id; paged by cursor. ${VISIBILITY} Filters that name unknown ids simply match nothing.`,
        tags: ['chats'],
        security: API_KEY_SECURITY,
        headers: workspaceHeader,
        querystring: ChatListQuery,
        response: { 200: ChatListResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => {
      const { limit, ...query } = request.query;
      return {
        data: await listChats(deps, await access(request), {
          ...query,
          limit: Math.min(limit ?? CHAT_PAGE.defaultLimit, CHAT_PAGE.maxLimit),
        }),
      };
    },
  );

  app.get<{ Params: Static<typeof ChatParams> }>(
    '/chats/:chatId',
    {
      schema: {
        summary: 'Get a chat',
        description: `\`chatId\` may be the chat's \`clientId\`. ${VISIBILITY}`,
        tags: ['chats'],
        security: API_KEY_SECURITY,
        headers: workspaceHeader,
        params: ChatParams,
        response: { 200: ChatResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => ({
      data: { chat: await getChat(deps, await access(request), request.params.chatId) },
    }),
  );

  app.patch<{ Params: Static<typeof ChatParams>; Body: Static<typeof RenameChatBody> }>(
    '/chats/:chatId',
    {
      schema: {
        summary: 'Rename a chat',
        tags: ['chats'],
        security: API_KEY_SECURITY,
        headers: workspaceHeader,
        params: ChatParams,
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

  app.delete<{ Params: Static<typeof ChatParams> }>(
    '/chats/:chatId',
    {
      schema: {
        summary: 'Delete a chat',
        description:
          'Stops a reply in progress, then deletes the chat and its messages; a second delete is 404. Usage already counted stays counted; agent runs keep their `chatId`.',
        tags: ['chats'],
        security: API_KEY_SECURITY,
        headers: workspaceHeader,
        params: ChatParams,
        response: { 200: DeletedResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => {
      await deleteChat(deps, await access(request), request.params.chatId);
      return { data: { deleted: true } };
    },
  );

  app.get<{ Params: Static<typeof ChatParams>; Querystring: Static<typeof MessageListQuery> }>(
    '/chats/:chatId/messages',
    {
      schema: {
        summary: "List a chat's messages",
        description:
          'The latest messages before `cursor` (default: the newest), oldest first, as UI messages (`id`, `role`, `parts`, `metadata`): the first page can be given to `useChat({ messages })` as it is. `nextCursor` pages further back.',
        tags: ['chats'],
        security: API_KEY_SECURITY,
        headers: workspaceHeader,
        params: ChatParams,
        querystring: MessageListQuery,
        response: { 200: MessageListResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => {
      const { limit, cursor } = request.query;
      return {
        data: await listMessages(deps, await access(request), request.params.chatId, {
          cursor,
          limit: Math.min(limit ?? MESSAGE_PAGE.defaultLimit, MESSAGE_PAGE.maxLimit),
        }),
      };
    },
  );
}
