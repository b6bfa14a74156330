import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { type ChatDeps, completeConversation, startConversation } from '../../services/chat.js';
import { ChatBody, ChatOkResponse } from '../schemas/chat.js';
import { logApiError } from '../plugins/error-handler.js';
import { writeUIMessageStream } from '../ui-message-sse.js';
import { API_KEY_SECURITY, COMMON_ERRORS, errorResponses } from '../schemas/common.js';

export async function chatRoutes(app: FastifyInstance, deps: ChatDeps): Promise<void> {
  app.post<{ Body: Static<typeof ChatBody> }>(
    '/chat',
    {
      schema: {
        summary: 'Create a chat completion',
        description:
          'Runs the agent on the conversation and persists it. With `stream: true` the reply is an AI SDK UI message stream (v1); the chat id is in the `x-chat-id` header and in `messageMetadata.chatId` of the `start` chunk.',
        tags: ['chat'],
        security: API_KEY_SECURITY,
        body: ChatBody,
        response: { 200: ChatOkResponse, ...errorResponses(...COMMON_ERRORS, 402, 502, 504) },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const conversation = await startConversation(deps, request.principal, body);
      if (!body.stream) {
        const outcome = await completeConversation(conversation);
        return {
          text: outcome.text,
          messageId: conversation.messageId,
          chatId: conversation.chatId,
          usage: {
            inputTokens: outcome.usage.inputTokens,
            outputTokens: outcome.usage.outputTokens,
            costUsd: outcome.costUsd,
          },
          ...(conversation.warnings.length > 0 ? { warnings: conversation.warnings } : {}),
        };
      }
      // From here the response is the stream; hooks no longer run, so their headers go along.
      reply.hijack();
      // The stream is read to its end even when the client goes away, so the reply is stored.
      void writeUIMessageStream(
        reply.raw,
        conversation.stream(),
        {
          ...(reply.getHeaders() as Record<string, string>),
          'x-request-id': request.id,
          'x-chat-id': conversation.chatId,
        },
        (error) => {
          request.log.error({ err: error }, 'reply stream failed');
          void conversation.abandon(error);
        },
      );
      // A provider failure mid-stream reaches the client as an `error` chunk; the log gets it too.
      void conversation.done.then((outcome) => {
        if (!outcome.ok) logApiError(request.log, outcome.error, 'streamed reply failed');
      });
    },
  );
}
