import { type TSchema, Type } from 'typebox';

/** The one error body (decisions.md), registered once and referenced by every route. */
export const ErrorBody = Type.Object(
  {
    code: Type.String({ description: 'Machine-readable code', examples: ['not_found'] }),
    message: Type.String({ description: 'Human-readable text' }),
    details: Type.Object({}, { additionalProperties: true }),
  },
  { $id: 'Error', title: 'Error' },
);

export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC with milliseconds' });

export const Pagination = Type.Object(
  { total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() },
  { $id: 'Pagination', title: 'Pagination' },
);
export const PaginationRef = Type.Unsafe<{ total: number; limit: number; offset: number }>({
  $ref: 'Pagination#',
});

/** A list's `offset`; the maximum keeps it within what either database takes as a row count. */
export const MAX_OFFSET = 2_147_483_647;
export const OffsetQuery = Type.Optional(
  Type.Integer({ minimum: 0, maximum: MAX_OFFSET, default: 0, description: 'Items to skip' }),
);

/** `{ data: … }`: the envelope of every successful response except `POST /chat`. */
export function envelope<T extends TSchema>(data: T) {
  return Type.Object({ data });
}

const STATUS_DESCRIPTION: Record<number, string> = {
  400: 'Validation failed (`bad_request`)',
  401: 'Missing or invalid key (`not_authenticated`), or a key not permitted here (`unauthorized`)',
  402: 'Usage limit or spend cap reached',
  403: 'Signed URL tampered (`invalid_signature`) or expired (`url_expired`)',
  404: 'Unknown or invisible resource (`not_found`)',
  405: 'Known path, wrong method',
  408: 'The request (headers or body) arrived too slowly (`request_timeout`)',
  409: 'Conflict: project quota (`quota_exceeded`), a duplicate (`conflict`) or an object the setup file manages (`managed_by_setup`)',
  413: 'Body over its byte limit (`payload_too_large`)',
  415: 'Wrong request content type (`unsupported_media_type`)',
  429: 'Per-key rate limit (`rate_limited`)',
  500: 'Unexpected failure (`internal_error`)',
  502: 'The model provider failed (`upstream_error`)',
  503: 'Too many replies in progress on this process (`service_unavailable`); see `Retry-After`',
  504: 'The model provider did not answer in time (`upstream_timeout`)',
};

/** Error responses for the given statuses, each pointing at the shared error body. */
export function errorResponses(...statuses: number[]) {
  const responses: Record<number, TSchema> = {};
  for (const status of statuses) {
    responses[status] = Type.Unsafe({ $ref: 'Error#', description: STATUS_DESCRIPTION[status] ?? 'Error' });
  }
  return responses;
}

/** Statuses every authenticated `/v1` route can answer with. */
export const COMMON_ERRORS = [400, 401, 404, 405, 408, 413, 415, 429, 500] as const;

export const API_KEY_SECURITY: Array<Record<string, string[]>> = [{ apiKey: [] }, { bearer: [] }];
