import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config.js';
import type { ApiError } from '../../errors.js';
import { type ChatDeps, startConversation } from '../../services/chat.js';
import {
  asRequestError,
  completionChunks,
  completionObject,
  conversationRequest,
  openAIError,
} from '../../services/openai-chat.js';
import { getModel, listModels } from '../../services/openai-models.js';
import { logApiError, toApiError, type UnmatchedRoute, withAcceptedTypes } from '../plugins/error-handler.js';
import { requestedWorkspaceId } from '../plugins/auth.js';
import { API_KEY_SECURITY, errorResponses, WorkspaceHeader } from '../schemas/common.js';
import {
  Completion,
  CompletionBody,
  CompletionHeaders,
  CompletionStream,
  openAIErrorResponses,
  OpenAIModel,
  OpenAIModelList,
  OpenAIModelParams,
} from '../schemas/openai.js';
import { headerDoc } from '../schemas/headers.js';
import type { StreamHeartbeat } from '../stream-heartbeat.js';
import { LiveEventStream } from '../ui-message-sse.js';
import { withIdleTimeoutPaused } from '../idle-timeout-pause.js';
import type { TypedApp } from '../typed-app.js';

/** Event-stream headers of OpenAI's stream (not the AI SDK's UI message stream marker; no `connection`: UI_STREAM_HEADERS). */
const OPENAI_STREAM_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
};

const LIST_ERRORS = [400, 401, 404, 405, 429, 500, 503] as const;

/**
 * Answered by Node's HTTP parser before any path is read, so in Atrium's shape here too
 * (docs/openai.md, Errors): headers too slow (408), too large (431).
 */
const BEFORE_ROUTING_ERRORS = errorResponses(408, 431);

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** Provider statuses worth retrying: a timeout, a lock, a rate limit. Other 4xx refuse the request itself. */
const TRANSIENT_PROVIDER_STATUSES = new Set([408, 409, 429]);

/**
 * Whether the OpenAI SDKs' retry would only meet the same answer: a 402 (a limit the same
 * request meets again), a 409, which here is never a lock timeout (a reply stopped on purpose,
 * which a retry would run and charge again), and a 502 relaying the provider's refusal of the
 * request (a prompt past the model's context window, a bad provider key).
 */
function retryIsFutile(error: ApiError): boolean {
  if (error.status === 402 || error.status === 409) return true;
  const providerStatus = error.details.providerStatus;
  return (
    error.code === 'upstream_error' &&
    typeof providerStatus === 'number' &&
    providerStatus >= 400 &&
    providerStatus < 500 &&
    !TRANSIENT_PROVIDER_STATUSES.has(providerStatus)
  );
}

/**
 * Errors in OpenAI's shape so OpenAI clients surface them. The OpenAI SDKs retry 408, 409, 429
 * and 5xx unless `x-should-retry: false` says otherwise (honoured first): said where a retry
 * is futile.
 */
export function sendOpenAIError(request: FastifyRequest, reply: FastifyReply, error: unknown) {
  const apiError = withAcceptedTypes(toApiError(error), request);
  logApiError(request.log, apiError);
  if (typeof apiError.details.retryAfterSeconds === 'number') {
    reply.header('retry-after', String(apiError.details.retryAfterSeconds));
  }
  if (retryIsFutile(apiError)) reply.header('x-should-retry', 'false');
  if (Array.isArray(apiError.details.allow)) reply.header('allow', apiError.details.allow.join(', '));
  return reply.code(apiError.status).type('application/json; charset=utf-8').send(openAIError(apiError));
}

/** Where the OpenAI-compatible routes are mounted (app.ts). */
export const OPENAI_PREFIX = '/v1/openai';

/** Whether a request's path is under the OpenAI-compatible routes, whose errors have OpenAI's shape. */
export function isOpenAIPath(url: string): boolean {
  return url === OPENAI_PREFIX || url.startsWith(`${OPENAI_PREFIX}/`) || url.startsWith(`${OPENAI_PREFIX}?`);
}

/** `/v1/openai/*` (spec/openai-compatible.md): a second door to the conversation machinery of `/chat`. */
export async function openAIRoutes(
  app: TypedApp,
  deps: ChatDeps,
  limits: Pick<Config, 'chatBodyLimitBytes'>,
  unmatched: UnmatchedRoute,
  heartbeat: StreamHeartbeat,
): Promise<void> {
  // Covers the key check and the rate limit of the parent scope too: hooks fail into the
  // error handler of the route they ran for.
  app.setErrorHandler((error, request, reply) => sendOpenAIError(request, reply, error));
  app.setNotFoundHandler((request, reply) => sendOpenAIError(request, reply, unmatched(request)));

  app.get(
    '/models',
    {
      schema: {
        summary: 'List models (OpenAI-compatible)',
        operationId: 'openaiListModels',
        description:
          "The agents the key may use, as OpenAI models: the same set and order as the workspace's agent list. An organization key names the workspace in `x-workspace-id`. Errors have OpenAI's shape.",
        tags: ['openai'],
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        response: { 200: OpenAIModelList, ...openAIErrorResponses(...LIST_ERRORS), ...BEFORE_ROUTING_ERRORS },
      },
    },
    async (request) => listModels(deps.db, request.principal, requestedWorkspaceId(request)),
  );

  app.get(
    '/models/:model',
    {
      schema: {
        summary: 'Retrieve a model (OpenAI-compatible)',
        operationId: 'openaiRetrieveModel',
        description: 'One agent as an OpenAI model, or 404 `model_not_found`.',
        tags: ['openai'],
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: OpenAIModelParams,
        response: { 200: OpenAIModel, ...openAIErrorResponses(...LIST_ERRORS), ...BEFORE_ROUTING_ERRORS },
      },
    },
    async (request) =>
      getModel(deps.db, request.principal, requestedWorkspaceId(request), request.params.model),
  );

  app.post(
    '/chat/completions',
    {
      bodyLimit: limits.chatBodyLimitBytes,
      // OpenAI documents its optional fields as nullable, and clients that pass `None` through
      // (the Python SDK's callers, LiteLLM) send `"temperature": null`: null is left out.
      preValidation: async (request) => {
        const body = request.body as Record<string, unknown> | null;
        if (body && typeof body === 'object' && !Array.isArray(body)) {
          for (const [field, value] of Object.entries(body)) if (value === null) delete body[field];
        }
      },
      schema: {
        summary: 'Create a chat completion (OpenAI-compatible)',
        operationId: 'openaiCreateChatCompletion',
        description:
          "OpenAI's Chat Completions with an agent id as `model`. The agent's instructions and project context come first, then the client's `system`/`developer` messages. Client function `tools` are returned as `tool_calls`; a call of a tool nobody declared is answered to the model as a tool error, and the model answers; the agent's own tools (MCP, orchestration, remember) run inside Atrium and never show. Stored only for a named chat: `chat_id` / `x-atrium-chat-id`, or `x-atrium-conversation-key` (a chat of the key's user's own, per agent); the chat stores the new messages only when the stored conversation is a prefix of the request's (else `x-atrium-chat-persisted: false`). Refused (400): `n` other than 1, `logprobs`, audio output, `response_format` other than text. With `stream: true`: `text/event-stream` of `chat.completion.chunk`, the usage chunk with `stream_options.include_usage`, then `data: [DONE]`; a failure after the stream started is one `data: {\"error\": …}` event.",
        tags: ['openai'],
        security: API_KEY_SECURITY,
        body: CompletionBody,
        response: {
          200: {
            description: 'A `chat.completion` object, or with `stream: true` an event stream',
            headers: {
              'x-atrium-chat-id': headerDoc('The stored chat, when the request named one'),
              'x-atrium-chat-persisted': headerDoc(
                '`false` when the named chat could not store the new messages',
              ),
            },
            content: {
              'application/json': { schema: Completion },
              'text/event-stream': { schema: CompletionStream },
            },
          },
          ...openAIErrorResponses(400, 401, 402, 404, 405, 408, 409, 413, 415, 429, 500, 502, 503, 504),
          // Its 408 is OpenAI's shape (a slow body); headers too slow are Atrium's, as on every route.
          ...errorResponses(431),
        },
      },
      // The headers naming the chat, in the document only: the conversation key's bounds are
      // checked with the rest of the naming (conversationRequest), in its own words.
      config: {
        swaggerTransform: ({ schema, url }) => ({ url, schema: { ...schema, headers: CompletionHeaders } }),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const naming = {
        chatId: body.chat_id ?? header(request, 'x-atrium-chat-id'),
        conversationKey: header(request, 'x-atrium-conversation-key'),
        userId: request.principal.userId,
      };
      const input = conversationRequest(body, naming);
      // An OpenAI client cannot resume a reply (useChat can, so /v1/chat runs on): one that leaves
      // a stream has stopped it, and a named chat keeps what the client saw; one that leaves a
      // JSON request (its timeout, a proxy's) can never read the answer, and its retry answers the
      // stored turn instead (docs/openai.md). It may leave while the reply is still being set up
      // (MCP servers, file downloads): listened for from the start, so that close is not missed.
      const client = { left: false, stopReply: () => {} };
      reply.raw.once('close', () => {
        if (reply.raw.writableEnded) return;
        client.left = true;
        client.stopReply();
      });
      const conversation = await startConversation(deps, request.principal, input).catch((error: unknown) => {
        throw asRequestError(error, body, naming);
      });
      client.stopReply = () => conversation.stop();
      if (client.left) conversation.stop();
      void conversation.done.then((outcome) => {
        if (!outcome.ok && outcome.unstored) {
          request.log.error(
            { err: outcome.error.cause ?? outcome.error, chatId: conversation.chatId },
            'storing the reply failed',
          );
        }
      });
      if (conversation.stored) reply.header('x-atrium-chat-id', conversation.chatId);
      else if (input.chatId !== undefined || input.clientChatId !== undefined) {
        reply.header('x-atrium-chat-persisted', 'false');
      }
      const clientToolNames = new Set(Object.keys(input.clientTools ?? {}));
      const created = Math.floor(deps.clock().getTime() / 1000);
      if (!body.stream) {
        const outcome = await withIdleTimeoutPaused(request, () => conversation.complete());
        if (!outcome.ok) throw outcome.error;
        return completionObject(conversation, outcome, clientToolNames, created);
      }
      reply.hijack();
      const headers = { ...(reply.getHeaders() as Record<string, string>), 'x-request-id': request.id };
      const live = new LiveEventStream(reply.raw, heartbeat);
      live.open(headers, OPENAI_STREAM_HEADERS);
      conversation.stream(
        completionChunks(
          live,
          conversation,
          {
            clientToolNames,
            includeUsage: body.stream_options?.include_usage === true,
            created,
          },
          (error) => {
            request.log.error({ err: error }, 'reply stream failed');
            void conversation.abandon(error);
          },
        ),
      );
    },
  );
}
