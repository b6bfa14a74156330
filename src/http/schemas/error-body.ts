import { type TSchema, Type } from 'typebox';
import { ERROR_STATUS, type ErrorCode } from '../../errors.js';

/** Every code the API answers with (errors.ts); a test fails when one is thrown that is not here. */
export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

const number = (description: string) => Type.Optional(Type.Number({ description }));
const text = (description: string) => Type.Optional(Type.String({ description }));

/**
 * What `details` holds, by code. Every field is optional: a code carries only its own, and an
 * error from an agent run adds `runId`. Other fields may appear (the sync counts of a refused
 * sync, for one).
 */
const ErrorDetails = Type.Object(
  {
    issues: Type.Optional(
      Type.Array(Type.Object({ path: Type.String(), message: Type.String() }), {
        description: '`bad_request` from validation: each failing input, e.g. `body.messages`',
      }),
    ),
    expected: text('`bad_request` of a signed upload: the Content-Type it was signed for'),
    received: Type.Optional(
      Type.Union([Type.String(), Type.Null()], {
        description: '`bad_request` of a signed upload: the one sent',
      }),
    ),
    storagePath: text('`bad_request`: the storage path that conflicts with another'),
    allow: Type.Optional(
      Type.Array(Type.String(), {
        description:
          '`method_not_allowed`: the methods the path (or the signed storage URL) takes (also `Allow`)',
      }),
    ),
    accepted: Type.Optional(
      Type.Array(Type.String(), {
        description:
          '`unsupported_media_type`: the body types the route takes (a route without a body: `application/json`, which it reads and ignores)',
      }),
    ),
    contentEncoding: text(
      '`unsupported_media_type` of a body under a `Content-Encoding` other than `identity`: the header as sent',
    ),
    etag: Type.Optional(
      Type.Union([Type.String(), Type.Null()], {
        description:
          '`precondition_failed`: the ETag (unquoted) of the version a signed download serves, or of the object in place for a conditional upload (null: none is)',
      }),
    ),
    reason: text('`not_found` of a signed download: `version_changed` when the file was replaced'),
    param: text('`not_found` of the OpenAI-compatible door: the parameter at fault (`model`)'),
    openaiCode: text("`not_found` of the OpenAI-compatible door: OpenAI's own code (`model_not_found`)"),
    expiredAt: text('`url_expired`: when the signed URL expired (ISO 8601)'),
    retryAfterSeconds: number('`rate_limited`, `service_unavailable`: seconds to wait (also `Retry-After`)'),
    maxBytes: number(
      '`payload_too_large`, `headers_too_large`, `quota_exceeded`: the byte limit; `upstream_error`: the size a provider response exceeded',
    ),
    maxFiles: number('`quota_exceeded`: files a project may hold'),
    limit: text('`quota_exceeded` of an upload URL: which limit, `files` or `bytes`'),
    notRegistered: Type.Optional(
      Type.Array(Type.String(), {
        description: '`quota_exceeded` of a sync: paths not registered (first 100)',
      }),
    ),
    notRegisteredCount: number('`quota_exceeded` of a sync: how many paths were not registered'),
    field: text('`conflict`: the field whose value is taken (`title`, `name`)'),
    managedBy: Type.Optional(
      Type.Literal('setup', { description: '`managed_by_setup`: the setup file owns the object' }),
    ),
    headersTimeoutMs: number('`request_timeout` of slow headers: the deadline'),
    bodyTimeoutMs: number('`request_timeout` of a slow body: the base deadline'),
    minBytesPerSecond: number('`request_timeout` of a slow body: the rate that extends it'),
    month: text('`usage_limit_exceeded`: the month counted (`YYYY-MM`)'),
    limitTokens: number('`usage_limit_exceeded`: the monthly token limit'),
    usedTokens: number('`usage_limit_exceeded`: tokens used this month'),
    reservedTokens: number('`usage_limit_exceeded`: tokens promised to requests in progress'),
    limitUsd: number('`usage_limit_exceeded`: the monthly cost limit'),
    usedUsd: number('`usage_limit_exceeded`: cost this month'),
    reservedUsd: number(
      '`usage_limit_exceeded`, `spend_cap_exceeded`: cost promised to requests in progress',
    ),
    chatId: text(
      '`spend_cap_exceeded`: the chat at its cap; on `/v1/chat`, `conflict`, `upstream_error` and `upstream_timeout`: the chat the turn is stored in',
    ),
    capUsd: number('`spend_cap_exceeded`: the chat’s spend cap'),
    spentUsd: number('`spend_cap_exceeded`: what the chat has spent'),
    providerStatus: number('`upstream_error`: the HTTP status the model provider answered'),
    model: text('`upstream_error`: the model that cannot be used'),
    messageId: text(
      '`upstream_error`, `upstream_timeout` of `/v1/chat` (JSON) and agent runs: the reply stored with the output before the failure',
    ),
    runId: text('Any error of an agent run (`POST /agents/{agentId}/runs`): the run recorded as failed'),
  },
  { additionalProperties: true, description: 'Facts about the failure; which fields, depends on `code`' },
);

export const ErrorBody = Type.Object(
  {
    code: Type.Unsafe<ErrorCode>({
      type: 'string',
      enum: ERROR_CODES,
      description: 'Machine-readable; each code has one HTTP status (see the error responses)',
    }),
    message: Type.String({ description: 'Human-readable text' }),
    details: ErrorDetails,
  },
  { $id: 'Error', title: 'Error', description: 'The one error body of every route outside `/v1/openai`' },
);

interface StatusDoc {
  description: string;
  /** Named by code, or by `name` where a code has two examples. */
  examples: Array<{ name?: string; code: ErrorCode; message: string; details: Record<string, unknown> }>;
}

/** Each error status: what it means and an example body with its real code and details. */
const STATUS_DOCS: Record<number, StatusDoc> = {
  400: {
    description: 'Validation failed or the request is malformed (`bad_request`); see `details.issues`',
    examples: [
      {
        code: 'bad_request',
        message: 'body.messages must NOT have fewer than 1 items',
        details: { issues: [{ path: 'body.messages', message: 'must NOT have fewer than 1 items' }] },
      },
    ],
  },
  401: {
    description: 'Missing or invalid key (`not_authenticated`), or a key not permitted here (`unauthorized`)',
    examples: [
      {
        code: 'not_authenticated',
        message: 'A valid API key is required in the x-service-api-key header (or as Authorization: Bearer)',
        details: {},
      },
      { code: 'unauthorized', message: 'This API key may not access this resource', details: {} },
    ],
  },
  402: {
    description:
      'The workspace’s monthly limit (`usage_limit_exceeded`) or the chat’s spend cap (`spend_cap_exceeded`)',
    examples: [
      {
        code: 'usage_limit_exceeded',
        message: 'The workspace has reached its monthly token limit',
        details: { month: '2026-11', limitTokens: 1000000, usedTokens: 1000214 },
      },
      {
        code: 'spend_cap_exceeded',
        message: 'The chat has reached its spend cap',
        details: { chatId: 'cht_8x2k', capUsd: 1, spentUsd: 1.02 },
      },
    ],
  },
  403: {
    description: 'Signed URL tampered with (`invalid_signature`) or expired (`url_expired`)',
    examples: [
      {
        code: 'invalid_signature',
        message: 'The signed URL is invalid or has been tampered with',
        details: {},
      },
      {
        code: 'url_expired',
        message: 'The signed URL has expired',
        details: { expiredAt: '2026-11-23T16:15:00.000Z' },
      },
    ],
  },
  404: {
    description: 'Unknown or invisible resource (`not_found`)',
    examples: [{ code: 'not_found', message: 'Project not found', details: {} }],
  },
  405: {
    description:
      'Known path, wrong method, or a signed storage URL, not yet expired, sent with the method it is not for (`method_not_allowed`); `Allow` lists the methods',
    examples: [
      {
        code: 'method_not_allowed',
        message: 'PUT is not allowed on /v1/projects',
        details: { allow: ['GET', 'HEAD', 'POST'] },
      },
    ],
  },
  408: {
    description: 'The request (headers or body) arrived too slowly (`request_timeout`)',
    examples: [
      {
        code: 'request_timeout',
        message: 'The request body arrived too slowly',
        details: { bodyTimeoutMs: 30000, minBytesPerSecond: 65536 },
      },
    ],
  },
  409: {
    description:
      'Project quota (`quota_exceeded`), a duplicate (`conflict`) or an object the setup file manages (`managed_by_setup`)',
    examples: [
      {
        code: 'conflict',
        message: 'A key named "ci" already exists in this workspace',
        details: { field: 'name' },
      },
      {
        code: 'managed_by_setup',
        message: 'This project is managed by the setup file; change it there',
        details: { managedBy: 'setup' },
      },
      {
        code: 'quota_exceeded',
        message: 'A project holds at most 500 files',
        details: { limit: 'files', maxFiles: 500, maxBytes: 524288000 },
      },
    ],
  },
  412: {
    description:
      'The file is not the version an `If-Match` or `If-Unmodified-Since` asked for (`precondition_failed`)',
    examples: [
      {
        code: 'precondition_failed',
        message: 'The file is not the version the request is conditional on (If-Match, If-Unmodified-Since)',
        details: { etag: '5d41402abc4b2a76b9719d911017c592' },
      },
    ],
  },
  413: {
    description: 'Body over its byte limit (`payload_too_large`)',
    examples: [
      {
        code: 'payload_too_large',
        message: 'The body is larger than the declared 1024 bytes; nothing was stored',
        details: { maxBytes: 1024 },
      },
    ],
  },
  415: {
    description:
      'Wrong request content type, a JSON body declared in a charset other than UTF-8, or a body under a `Content-Encoding` other than `identity` (`unsupported_media_type`)',
    examples: [
      {
        code: 'unsupported_media_type',
        message: 'Unsupported Media Type: text/plain; this route takes application/json',
        details: { accepted: ['application/json'] },
      },
      {
        name: 'no_body',
        code: 'unsupported_media_type',
        message:
          'Unsupported Media Type: text/plain; this route takes no body (an application/json body is ignored)',
        details: { accepted: ['application/json'] },
      },
      {
        name: 'charset',
        code: 'unsupported_media_type',
        message: 'The JSON body must be UTF-8 (RFC 8259), not charset=utf-16',
        details: { accepted: ['application/json; charset=utf-8'] },
      },
      {
        name: 'content_encoding',
        code: 'unsupported_media_type',
        message: 'Content-Encoding gzip is not supported; send the body unencoded (identity)',
        details: { contentEncoding: 'gzip' },
      },
    ],
  },
  429: {
    description: 'Per-key rate limit (`rate_limited`); see `Retry-After`',
    examples: [
      {
        code: 'rate_limited',
        message: 'Rate limit of 600 requests per minute reached',
        details: { retryAfterSeconds: 42 },
      },
    ],
  },
  431: {
    description: 'Request headers too large (`headers_too_large`)',
    examples: [
      {
        code: 'headers_too_large',
        message: 'The request headers exceed 16384 bytes',
        details: { maxBytes: 16384 },
      },
    ],
  },
  500: {
    description: 'Unexpected failure (`internal_error`); the log has the cause under `x-request-id`',
    examples: [{ code: 'internal_error', message: 'Internal server error', details: {} }],
  },
  502: {
    description: 'The model provider failed (`upstream_error`)',
    examples: [
      {
        code: 'upstream_error',
        message: 'The model provider answered HTTP 500',
        details: { providerStatus: 500 },
      },
    ],
  },
  503: {
    description:
      'Try again shortly (`service_unavailable`, see `Retry-After`): storage or the database did not answer (or Redis, for stop and resume of a reply), or (chat routes) too many replies are in progress on this process, or it is shutting down',
    examples: [
      {
        code: 'service_unavailable',
        message: 'Storage or the database did not answer; try again shortly',
        details: { retryAfterSeconds: 5 },
      },
      {
        name: 'too_many_replies',
        code: 'service_unavailable',
        message: 'Too many replies are being generated right now; try again shortly',
        details: { retryAfterSeconds: 5 },
      },
      {
        name: 'shutting_down',
        code: 'service_unavailable',
        message: 'This server is shutting down; send the request again',
        details: { retryAfterSeconds: 5 },
      },
    ],
  },
  504: {
    description: 'The model provider did not answer in time (`upstream_timeout`)',
    examples: [
      {
        code: 'upstream_timeout',
        message: 'The model provider did not answer within 120000 ms',
        details: {},
      },
    ],
  },
};

/** Error responses for the given statuses, each pointing at the shared error body. */
export function errorResponses(...statuses: number[]) {
  const responses: Record<number, TSchema> = {};
  for (const status of statuses) {
    responses[status] = Type.Unsafe({
      $ref: 'Error#',
      description: STATUS_DOCS[status]?.description ?? 'Error',
    });
  }
  return responses;
}

/**
 * OpenAPI examples of an error status, named by code. The OpenAPI plugin adds them to each error
 * response (a `$ref` response schema cannot carry them through @fastify/swagger).
 */
export function errorExamples(status: number): Record<string, { value: unknown }> | undefined {
  const doc = STATUS_DOCS[status];
  if (!doc) return undefined;
  return Object.fromEntries(
    doc.examples.map(({ name, ...example }) => [name ?? example.code, { value: example }]),
  );
}

/**
 * Statuses Node's HTTP parser (or the Host check) answers on any route, before the route is
 * known, always in the `Error` shape (protocol-errors.ts): a malformed request or no Host (400),
 * headers too slow (408), headers too large (431).
 */
export const PROTOCOL_ERRORS = [400, 408, 431] as const;

/** Statuses every authenticated `/v1` route can answer with. */
export const COMMON_ERRORS = [400, 401, 404, 405, 408, 413, 415, 429, 431, 500, 503] as const;
