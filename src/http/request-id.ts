/** Long enough for a UUID, a trace id or a load balancer's id with a prefix. */
const MAX_REQUEST_ID_LENGTH = 128;
const SAFE_REQUEST_ID = /^[A-Za-z0-9._:@/+=-]+$/;

/**
 * A client's `x-request-id` when it is fit to log and echo (at most 128 characters of letters,
 * digits and `._:@/+=-`), else undefined and the caller generates one. A repeated header
 * arrives joined with ", " and is refused like any other malformed value.
 */
export function requestIdFrom(header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined;
  return header.length <= MAX_REQUEST_ID_LENGTH && SAFE_REQUEST_ID.test(header) ? header : undefined;
}
