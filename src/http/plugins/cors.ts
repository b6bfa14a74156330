import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config.js';

/**
 * Response headers a browser app may read: the chat id, the request id, the limits, and what a
 * signed download answers with (docs/files.md) that is not CORS-safelisted.
 */
const EXPOSED_HEADERS = [
  'x-chat-id',
  'x-request-id',
  'retry-after',
  'ratelimit',
  'ratelimit-policy',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  // The OpenAI-compatible door (spec/openai-compatible.md).
  'x-atrium-chat-id',
  'x-atrium-chat-persisted',
  'x-should-retry',
  'etag',
  'content-range',
  'content-disposition',
  'accept-ranges',
];

/**
 * The conditional and range headers signed downloads honour, and the conditional ones of signed
 * uploads (docs/files.md). None is
 * CORS-safelisted (a `Range` only when it is one `bytes=a-` or `bytes=a-b`): set by a page, each
 * makes the browser ask first.
 */
const DOWNLOAD_HEADERS = [
  'range',
  'if-range',
  'if-match',
  'if-none-match',
  'if-modified-since',
  'if-unmodified-since',
];

/**
 * Request headers the official OpenAI SDK (the `openai` package 6.x) can send; a browser app
 * built on it (`dangerouslyAllowBrowser`) cannot call `/v1/openai` unless the preflight allows
 * them. The first ten go with any call (the organization and project when configured);
 * `chat.completions.stream()`, `runTools()` and `parse()` add `x-stainless-helper-method`; the
 * last three go with APIs Atrium does not serve (beta features, polling helpers), allowed so
 * that such a call gets Atrium's 404, not a CORS failure.
 */
const OPENAI_SDK_HEADERS = [
  'x-stainless-arch',
  'x-stainless-lang',
  'x-stainless-os',
  'x-stainless-package-version',
  'x-stainless-retry-count',
  'x-stainless-runtime',
  'x-stainless-runtime-version',
  'x-stainless-timeout',
  'openai-organization',
  'openai-project',
  'x-stainless-helper-method',
  'openai-beta',
  'x-stainless-poll-helper',
  'x-stainless-custom-poll-interval',
];

/**
 * Cross-origin access for browser apps on `ATRIUM_CORS_ORIGINS` (spec/chats.md): preflights are
 * answered for every route, `/v1` and the signed storage URLs alike, before any key check (a
 * browser sends no key with a preflight). Without the setting, no cross-origin access.
 */
export async function registerCors(
  app: FastifyInstance,
  config: Pick<Config, 'corsOrigins' | 'apiKeyHeader'>,
) {
  if (config.corsOrigins.length === 0) return;
  const anyOrigin = config.corsOrigins.includes('*');
  await app.register(cors, {
    origin: anyOrigin ? '*' : config.corsOrigins,
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    allowedHeaders: [
      'content-type',
      'authorization',
      config.apiKeyHeader,
      'x-workspace-id',
      'x-request-id',
      'x-atrium-chat-id',
      'x-atrium-conversation-key',
      ...OPENAI_SDK_HEADERS,
      ...DOWNLOAD_HEADERS,
    ],
    exposedHeaders: EXPOSED_HEADERS,
    maxAge: 600,
    // A bare OPTIONS without the preflight headers goes on to the usual 404/405 error body.
    strictPreflight: false,
  });
}
