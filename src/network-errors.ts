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
 * Whether a failure is a service Atrium depends on being unavailable for now, rather than a
 * fault of Atrium or of the request: S3 (or any store or database) unreachable or dropping the
 * connection, S3 answering 5xx or "slow down" (the AWS SDK's `$fault: 'server'`, after its own
 * retries), PostgreSQL refusing connections or shutting down (SQLSTATE class 08, 57P01–57P03,
 * 53300 too many connections), SQLite's database locked past its busy timeout.
 */
export function isDependencyUnavailable(error: unknown): boolean {
  const code = networkErrorCode(error);
  if (code !== undefined && UNREACHABLE.has(code)) return true;
  let current: unknown = error;
  for (let depth = 0; depth < 6 && current; depth++) {
    const { $fault, code: ownCode } = current as { $fault?: unknown; code?: unknown };
    if ($fault === 'server') return true;
    if (typeof ownCode === 'string' && /^(?:08[0-9A-Z]{3}|57P0[123]|53300|SQLITE_BUSY\w*)$/.test(ownCode)) {
      return true;
    }
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
