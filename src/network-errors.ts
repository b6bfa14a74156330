/**
 * The network error code (ECONNREFUSED, EAI_AGAIN, UND_ERR_SOCKET…) somewhere in an error's
 * cause chain, if any: SDKs and fetch wrap the socket's error, sometimes twice.
 */
export function networkErrorCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 6 && current; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && /^(?:E[A-Z_]+|UND_ERR_[A-Z_]+)$/.test(code)) return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Codes of a service that cannot be reached or dropped the connection (not of a local fault). */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);

/**
 * node-postgres and pg-pool give a connection the server dropped, or one not made within the
 * pool's connect timeout, no code: their messages are all there is.
 */
const PG_CONNECTION_LOST =
  /^(?:Connection terminated unexpectedly|Connection terminated due to connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error and is not queryable)$/;

/** The AWS SDK's HTTP handler: no connection, or a socket idle past its limit (s3-store.ts). */
const S3_SOCKET_TIMEOUT =
  /^@smithy\/node-http-handler - the request socket (?:did not establish a connection|timed out after)/;

/**
/**
 * The AWS SDK's HTTP handler gave up on its own: no connection within its connect timeout, or the
 * socket idle past its limit. (A connection refused or reset is a `TimeoutError` too, with the
 * socket's code, and not matched.)
 */
export function isS3HandlerTimeout(error: unknown): boolean {
  const message = (error as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' && S3_SOCKET_TIMEOUT.test(message);
}

/**
 * ioredis gives up on a command while Redis is down with these, and no network code; one
 * unanswered past its `commandTimeout` (redis.ts) with the last message.
 */
const REDIS_UNAVAILABLE = new Set(['MaxRetriesPerRequestError']);
const REDIS_CONNECTION_CLOSED = /^(?:Connection is closed\.?|Command timed out)$/;

/**
 * Whether a failure is a service Atrium depends on being unavailable for now, rather than a
 * fault of Atrium or of the request: S3 (or any store or database) unreachable or dropping the
 * connection, S3 answering 5xx or "slow down" (the AWS SDK's `$fault: 'server'`, after its own
 * retries), PostgreSQL refusing or dropping connections or shutting down (the connection
 * SQLSTATEs 08000, 08001, 08003, 08004, 08006, then 57P01–57P03 and 53300 too many connections;
 * not 08P01, a statement Atrium got wrong), SQLite's database locked past its busy timeout,
 * Redis not answering (ioredis giving up on a command, or its answer not coming in time), an S3 request idle past its limit.
 */
export function isDependencyUnavailable(error: unknown): boolean {
  const code = networkErrorCode(error);
  if (code !== undefined && UNREACHABLE.has(code)) return true;
  let current: unknown = error;
  for (let depth = 0; depth < 6 && current; depth++) {
    const { $fault, code: ownCode } = current as { $fault?: unknown; code?: unknown };
    if ($fault === 'server') return true;
    if (typeof ownCode === 'string' && /^(?:0800[0-46]|57P0[123]|53300|SQLITE_BUSY\w*)$/.test(ownCode)) {
      return true;
    }
    const { message } = current as { message?: unknown };
    if (typeof message === 'string' && PG_CONNECTION_LOST.test(message)) return true;
    if (isS3HandlerTimeout(current)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return isRedisUnavailable(error);
}

/**
 * Whether a failure is ioredis giving up on a command (Redis down, or not answering in time):
 * the 503 then names Redis, not storage or the database.
 */
export function isRedisUnavailable(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 6 && current; depth++) {
    const { message, name } = current as { message?: unknown; name?: unknown };
    if (typeof name === 'string' && REDIS_UNAVAILABLE.has(name)) return true;
    if (typeof message === 'string' && REDIS_CONNECTION_CLOSED.test(message)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
