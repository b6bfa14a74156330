import type { TSchema } from 'typebox';

/** A response header as @fastify/swagger documents it (`response[status].headers`). */
export function headerDoc(description: string, type: 'string' | 'integer' = 'string') {
  return { type, description };
}

/** Sent on every response (request-id.ts): quote it when reporting a problem. */
export const REQUEST_ID_HEADER = headerDoc('The request id, also in the log lines of this request');

/**
 * Headers added by plugins to many responses, documented once as `components.headers` and
 * referenced from each response by the OpenAPI plugin (plugins/openapi.ts).
 */
export const SHARED_RESPONSE_HEADERS = {
  'x-request-id': REQUEST_ID_HEADER,
  RateLimit: headerDoc(
    'Keys with a rate limit: what is left of the current window, e.g. `"per-key";r=599;t=42` (draft-ietf-httpapi-ratelimit-headers)',
  ),
  'RateLimit-Policy': headerDoc('Keys with a rate limit: the policy, e.g. `"per-key";q=600;w=60`'),
  'x-ratelimit-limit': headerDoc('Keys with a rate limit: requests allowed per minute', 'integer'),
  'x-ratelimit-remaining': headerDoc('Keys with a rate limit: requests left in this minute', 'integer'),
  'Retry-After': headerDoc('Seconds to wait before trying again', 'integer'),
  Allow: headerDoc('The methods this path (or signed storage URL) takes, e.g. `GET, HEAD, POST`'),
  'x-should-retry': headerDoc(
    '`false` where a retry would meet the same answer (OpenAI-compatible routes: a 402, a 409, a 502 relaying the provider refusing the request itself); the OpenAI SDKs honour it',
  ),
} as const;

/** `schema` as a success response with its own description and headers (besides the shared ones). */
export function withHeaders<T extends TSchema>(
  schema: T,
  description: string,
  headers: Record<string, ReturnType<typeof headerDoc>>,
): T {
  return { ...schema, 'x-response-description': description, headers };
}
