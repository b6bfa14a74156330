import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config.js';
import { type ChatDeps, completeConversation, startConversation } from '../../services/chat.js';
import { withIdleTimeoutPaused } from '../idle-timeout-pause.js';
import { accessChats, resumeReply, stopReply } from '../../services/chats.js';
import { requestedWorkspaceId } from '../plugins/auth.js';
import { ChatBody, ChatOkResponse, ResumeOkResponse } from '../schemas/chat.js';
import { ChatParams, StopResponse } from '../schemas/chats.js';
import { ApiError } from '../../errors.js';
import { logApiError } from '../plugins/error-handler.js';
import { API_KEY_SECURITY, COMMON_ERRORS, errorResponses, WorkspaceHeader } from '../schemas/common.js';
import type { StreamHeartbeat } from '../stream-heartbeat.js';
import {
  LiveEventStream,
  UI_STREAM_HEADERS,
  uiMessageEventText,
  writeEventStream,
} from '../ui-message-sse.js';
import { sourceViews } from '../../knowledge/citations.js';
import type { TypedApp } from '../typed-app.js';
import { shownUsd } from '../../models/registry.js';

/** From here the response is the stream; hooks no longer run, so their headers go along. */
function streamHeaders(request: FastifyRequest, reply: FastifyReply, chatId: string): Record<string, string> {
  reply.hijack();
  return {
    ...(reply.getHeaders() as Record<string, string>),
    'x-request-id': request.id,
    'x-chat-id': chatId,
  };
}

export async function chatRoutes(
  app: TypedApp,
  deps: ChatDeps,
  limits: Pick<Config, 'chatBodyLimitBytes'>,
  heartbeat: StreamHeartbeat,
): Promise<void> {
  app.post(
    '/chat',
    {
      // File parts travel as data: URLs, and useChat resends the whole conversation.
      bodyLimit: limits.chatBodyLimitBytes,
      schema: {
        summary: 'Create a chat completion',
        operationId: 'chat',
        description:
          "Runs the agent on the conversation and stores it. The chat and the user's message are stored before the model is called, so the chat id can be read, stopped, resumed and continued at once. With `stream: true` the reply is an AI SDK UI message stream (v1); the chat id is in the `x-chat-id` header and in `messageMetadata.chatId` of the `start` chunk. Accepts what `useChat` / `DefaultChatTransport` send: `id` (the client's chat id), `trigger` and `messageId` (regenerate, and edit: `submit-message` with the `messageId` of a stored user message replaces it and every message after it). Body limit 16 MB.",
        tags: ['chat'],
        security: API_KEY_SECURITY,
        body: ChatBody,
        response: { 200: ChatOkResponse, ...errorResponses(...COMMON_ERRORS, 402, 409, 502, 503, 504) },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const conversation = await startConversation(deps, request.principal, {
        ...body,
        clientChatId: body.id,
        resumable: body.stream === true,
        regenerateMessageId: body.trigger === 'regenerate-message' ? body.messageId : undefined,
        editMessageId: body.trigger === 'submit-message' ? body.messageId : undefined,
      });
      // A reply that could not be stored is logged with the request id, whichever the mode.
      void conversation.done.then((outcome) => {
        if (!outcome.ok && outcome.unstored) {
          request.log.error(
            { err: outcome.error.cause ?? outcome.error, chatId: conversation.chatId },
            'storing the reply failed',
          );
        }
      });
      if (!body.stream) {
        const outcome = await withIdleTimeoutPaused(request, () => completeConversation(conversation)).catch(
          (error: unknown) => {
            throw withStoredChatId(error, conversation);
          },
        );
        return {
          text: outcome.text,
          messageId: conversation.messageId,
          chatId: conversation.chatId,
          usage: {
            inputTokens: outcome.usage.inputTokens,
            outputTokens: outcome.usage.outputTokens,
            costUsd: shownUsd(outcome.costUsd),
          },
          ...(conversation.warnings.length > 0 ? { warnings: conversation.warnings } : {}),
          ...(conversation.sources.length > 0 ? { sources: sourceViews(conversation.sources) } : {}),
        };
      }
      const headers = streamHeaders(request, reply, conversation.chatId);
      const live = new LiveEventStream(reply.raw, heartbeat);
      const replay = live.replayText();
      // The reply is read to its end even when the client goes away, so it is stored.
      conversation.stream(
        uiMessageEventText(live, (error) => {
          request.log.error({ err: error }, 'reply stream failed');
          void conversation.abandon(error);
        }),
      );
      try {
        await conversation.resumable(replay);
      } finally {
        live.open(headers);
      }
      // A provider failure mid-stream reaches the client as an `error` chunk; the log gets it too.
      void conversation.done.then((outcome) => {
        if (!outcome.ok) logApiError(request.log, outcome.error, 'streamed reply failed');
      });
    },
  );

  app.post(
    '/chat/:chatId/stop',
    {
      schema: {
        summary: 'Stop the reply being generated',
        operationId: 'stopReply',
        description:
          'Aborts the provider call of the reply being generated for the chat, in whichever process runs it. The text so far is stored as the assistant message with `finishReason: "stopped"`, and a streaming client gets a `finish` chunk and `[DONE]`. Answers once the stopped reply has been stored and the chat no longer runs it (at most 10 s): messages read and a turn sent right after see it. `stopped: false` when no reply was running. `chatId` may be the chat\'s `clientId`.',
        tags: ['chat'],
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: ChatParams,
        response: { 200: StopResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => {
      const access = await accessChats(deps.db, request.principal, requestedWorkspaceId(request));
      const { settled, ...stopped } = await stopReply(deps, access, request.params.chatId);
      if (!settled) {
        request.log.warn(
          { messageId: stopped.messageId },
          'stop answered at the end of its wait, before the stopped reply was known to be stored',
        );
      }
      return { data: stopped };
    },
  );

  app.get(
    '/chat/:chatId/stream',
    {
      schema: {
        summary: 'Resume the reply being generated',
        operationId: 'resumeReply',
        description:
          "Replays the reply being generated for the chat from its `start` chunk, then its live chunks, then `data: [DONE]` (what `useChat`'s `resume` / `resumeStream()` expect). A streamed reply still being set up (files fetched, MCP servers connected) is waited for. 204 with no body when no reply is being generated. `chatId` may be the chat's `clientId`.",
        tags: ['chat'],
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: ChatParams,
        response: {
          200: ResumeOkResponse,
          204: { description: 'No reply is being generated', type: 'null' },
          ...errorResponses(...COMMON_ERRORS),
        },
      },
    },
    async (request, reply) => {
      const access = await accessChats(deps.db, request.principal, requestedWorkspaceId(request));
      const resumed = await resumeReply(deps, access, request.params.chatId);
      if (!resumed) return reply.code(204).send(null);
      const headers = streamHeaders(request, reply, resumed.chatId);
      if (request.method === 'HEAD') {
        // Whether there is a reply to resume, and the replay's headers: a HEAD has no body to
        // wait for, and held the replay (and its connection) open until the reply ended.
        void resumed.stream.cancel().catch(() => undefined);
        reply.raw.writeHead(200, { ...headers, ...UI_STREAM_HEADERS }).end();
        return;
      }
      void writeEventStream(reply.raw, resumed.stream, headers, heartbeat);
    },
  );
}

/**
 * A failed JSON reply whose user turn is stored says which chat holds it (`details.chatId`), so
 * the client can retry on that chat instead of starting another one, as a run's failure gives
 * `details.runId`. Not a 404: the chat was deleted while the reply ran, there is none to retry on.
 */
function withStoredChatId(error: unknown, conversation: { stored: boolean; chatId: string }): unknown {
  if (!(error instanceof ApiError) || !conversation.stored || error.code === 'not_found') return error;
  return new ApiError(
    error.code,
    error.message,
    { ...error.details, chatId: conversation.chatId },
    { cause: error.cause, refusal: error.refusal },
  );
}
