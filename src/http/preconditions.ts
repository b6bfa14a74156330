import type { IncomingHttpHeaders } from 'node:http';
import type { WriteCondition } from '../storage/object-store.js';

/** What a request's preconditions make of a GET or HEAD of one stored version. */
export type PreconditionOutcome = 'proceed' | 'not-modified' | 'failed';

/**
 * RFC 9110 13.2.2: the preconditions of a GET or HEAD, evaluated in the RFC's order after the
 * request's own checks (signature, version). An origin server must evaluate them; ignored, a
 * cache revalidating its copy always got the whole file again, and a client that asked for one
 * version (`If-Match`) got whatever was there. `fresh` (Express's) covers only the 304 half and
 * skips it under `Cache-Control: no-cache`, so the four are evaluated here, in one place.
 */
export function downloadPreconditions(
  headers: IncomingHttpHeaders,
  version: { etag: string; lastModified: Date },
): PreconditionOutcome {
  const etag = `"${version.etag}"`;
  // HTTP dates have whole seconds: a file written at 10:00:00.700 is "not modified since 10:00:00".
  const modified = Math.floor(version.lastModified.getTime() / 1000) * 1000;
  const ifMatch = headers['if-match'];
  if (ifMatch !== undefined) {
    if (!listHolds(ifMatch, etag, 'strong')) return 'failed';
  } else {
    const since = httpDate(headers['if-unmodified-since']);
    if (since !== undefined && modified > since) return 'failed';
  }
  const ifNoneMatch = headers['if-none-match'];
  if (ifNoneMatch !== undefined) {
    if (listHolds(ifNoneMatch, etag, 'weak')) return 'not-modified';
  } else {
    const since = httpDate(headers['if-modified-since']);
    if (since !== undefined && modified <= since) return 'not-modified';
  }
  return 'proceed';
}

/** Whether `*` or a list of entity tags (`"a", W/"b"`) holds `etag` (RFC 9110 8.8.3.2). */
function listHolds(field: string, etag: string, comparison: 'strong' | 'weak'): boolean {
  if (field.trim() === '*') return true;
  for (const [, weak, tag] of field.matchAll(/(W\/)?("[^"]*")/g)) {
    if (tag === etag && (weak === undefined || comparison === 'weak')) return true;
  }
  return false;
}

/** An HTTP date's time, or undefined for a missing or unparsable one (which is ignored). */
function httpDate(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const time = Date.parse(value);
  return Number.isNaN(time) ? undefined : time;
}

/**
 * RFC 9110 13.2.2 for a PUT: whether its preconditions hold of the object at the path now
 * (`current`, null when there is none). `If-Match` (`*` included) fails when there is no
 * object, and compares strongly; without it, an `If-Unmodified-Since` earlier than the object's
 * `Last-Modified` fails. `If-None-Match` fails when it holds the object's version (`*`: any
 * object). A PUT without them always proceeds.
 */
export function uploadPreconditions(headers: IncomingHttpHeaders): WriteCondition | undefined {
  const ifMatch = headers['if-match'];
  const ifNoneMatch = headers['if-none-match'];
  const unmodifiedSince = ifMatch === undefined ? httpDate(headers['if-unmodified-since']) : undefined;
  if (ifMatch === undefined && ifNoneMatch === undefined && unmodifiedSince === undefined) return undefined;
  return {
    holds(current) {
      const etag = current && `"${current.etag}"`;
      if (ifMatch !== undefined && (!etag || !listHolds(ifMatch, etag, 'strong'))) return false;
      if (current && unmodifiedSince !== undefined) {
        const modified = Math.floor(current.lastModified.getTime() / 1000) * 1000;
        if (modified > unmodifiedSince) return false;
      }
      return !(ifNoneMatch !== undefined && etag && listHolds(ifNoneMatch, etag, 'weak'));
    },
    // `*`: the write must create the object, which only an atomic create can promise.
    onlyIfAbsent: ifNoneMatch?.trim() === '*',
  };
}
