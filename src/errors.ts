import { isRedisUnavailable } from './network-errors.js';

/** Every error code the API answers with, and the one HTTP status each maps to (decisions.md). */
export const ERROR_STATUS = {
  bad_request: 400,
  not_authenticated: 401,
  unauthorized: 401,
  usage_limit_exceeded: 402,
  spend_cap_exceeded: 402,
  invalid_signature: 403,
  url_expired: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  quota_exceeded: 409,
  conflict: 409,
  managed_by_setup: 409,
  precondition_failed: 412,
  payload_too_large: 413,
  unsupported_media_type: 415,
  headers_too_large: 431,
  rate_limited: 429,
  internal_error: 500,
  upstream_error: 502,
  service_unavailable: 503,
  upstream_timeout: 504,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ValidationIssue {
  path: string;
  message: string;
}

/**
 * How a 5xx that is the service working as designed is logged, without a stack (README, "Logs"):
 * `info` for a refusal nobody need act on (shutting down), `warn` for one an operator may want to
 * size for (a process at its reply limit). Other 5xx are faults, logged at `error` with the cause.
 */
export type RefusalLogLevel = 'info' | 'warn';

export class ApiError extends Error {
  readonly status: number;
  readonly refusal?: RefusalLogLevel;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
    options?: { cause?: unknown; refusal?: RefusalLogLevel },
  ) {
    super(message, options && 'cause' in options ? { cause: options.cause } : undefined);
    this.name = 'ApiError';
    this.status = ERROR_STATUS[code];
    this.refusal = options?.refusal;
  }
}

/** Factories keep codes and messages consistent across the code base. */
export const errors = {
  badRequest: (message: string, issues?: ValidationIssue[]) =>
    new ApiError('bad_request', message, issues ? { issues } : {}),
  notAuthenticated: (message = 'A valid API key is required') => new ApiError('not_authenticated', message),
  /**
   * No key at all: says where the server reads one (`ATRIUM_API_KEY_HEADER`, or a bearer token);
   * `authorizationWithoutBearer`: an Authorization header came without the `Bearer ` scheme.
   */
  missingApiKey: (headerName: string, authorizationWithoutBearer = false) =>
    new ApiError(
      'not_authenticated',
      authorizationWithoutBearer
        ? `The Authorization header must be "Bearer " followed by the API key (the Bearer scheme is missing); or send the key alone in the ${headerName} header`
        : `A valid API key is required in the ${headerName} header (or as Authorization: Bearer)`,
    ),
  unauthorized: (message = 'This API key may not access this resource') =>
    new ApiError('unauthorized', message),
  notFound: (what: string) => new ApiError('not_found', `${what} not found`),
  quotaExceeded: (message: string, details: Record<string, unknown> = {}) =>
    new ApiError('quota_exceeded', message, details),
  payloadTooLarge: (message: string, details: Record<string, unknown> = {}) =>
    new ApiError('payload_too_large', message, details),
  conflict: (message: string, details: Record<string, unknown> = {}) =>
    new ApiError('conflict', message, details),
  managedBySetup: (what: string) =>
    new ApiError('managed_by_setup', `${what} is managed by the setup file; change it there`, {
      managedBy: 'setup',
    }),
  /** `accepted`: the types the route takes, as Fastify's own 415 lists them (error-handler.ts). */
  unsupportedMediaType: (message: string, accepted: string[]) =>
    new ApiError('unsupported_media_type', message, { accepted }),
  internal: (cause?: unknown) => new ApiError('internal_error', 'Internal server error', {}, { cause }),
  /**
   * The database, storage or Redis did not answer (network-errors.ts): a 503 the client may retry after
   * long enough for a connection pool or an S3 endpoint to recover from a blip, short enough not
   * to idle a client.
   */
  dependencyUnavailable: (cause: unknown) => {
    // Only stop and resume of a reply fail for Redis (REDIS_URL): each says which it was. A
    // Redis outage is logged once by itself (redis-outage-log.ts), so each refused stop or
    // resume is a warn line naming it, not an error with a stack per request.
    const redis = isRedisUnavailable(cause);
    return new ApiError(
      'service_unavailable',
      redis
        ? 'Redis did not answer (stop and resume of a reply need it); try again shortly'
        : 'Storage or the database did not answer; try again shortly',
      { retryAfterSeconds: 5 },
      redis ? { cause, refusal: 'warn' } : { cause },
    );
  },
};
