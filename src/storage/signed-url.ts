import { createHmac, timingSafeEqual } from 'node:crypto';
import { ApiError } from '../errors.js';

/**
 * The one module that creates and verifies signatures of URLs served by Atrium itself (the fs
 * backend). A signature is HMAC-SHA256 over the method, the storage path, the content type,
 * the declared size (uploads) or file name and version (downloads), and the expiry; changing
 * any of them, or pointing the URL at another path, breaks it.
 */

/** Where signed object URLs live, outside `/v1` and without an API key. */
export const STORAGE_ROUTE_PREFIX = '/storage/objects/';

export type SignedMethod = 'PUT' | 'GET';

export interface SignedFields {
  method: SignedMethod;
  key: string;
  contentType: string;
  /** Uploads: the exact size the PUT must have. */
  sizeBytes?: number;
  /** Downloads: the name in `Content-Disposition`. */
  filename?: string;
  /** Downloads: the version (etag) served; another object at the same path is not served. */
  etag?: string;
  /** Unix time in seconds. */
  expiresAt: number;
}

const PARAM = {
  contentType: 'contentType',
  sizeBytes: 'size',
  filename: 'filename',
  etag: 'version',
  expiresAt: 'expires',
  signature: 'signature',
} as const;

/** The query's only names: one more is an edited URL, as with S3's presigned URLs, which sign the whole query. */
const SIGNED_PARAMS = new Set<string>(Object.values(PARAM));

function deriveKey(secret: string): Buffer {
  // A key of its own, so the secret could sign other things later without cross-use.
  return createHmac('sha256', secret).update('atrium storage url v1').digest();
}

/** A JSON array, not a joined string: no field's content can shift into its neighbour's. */
function canonical(fields: SignedFields): string {
  return JSON.stringify([
    'v3',
    fields.method,
    fields.key,
    fields.contentType,
    fields.sizeBytes ?? null,
    fields.filename ?? null,
    fields.etag ?? null,
    fields.expiresAt,
  ]);
}

function sign(secret: string, fields: SignedFields): string {
  return createHmac('sha256', deriveKey(secret)).update(canonical(fields)).digest('base64url');
}

/** `a/b c/d.txt` → `a/b%20c/d.txt`: each segment encoded, slashes kept. */
export function encodeKeyPath(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}

/** The inverse of encodeKeyPath; undefined when a segment is not valid percent-encoding. */
export function decodeKeyPath(encoded: string): string | undefined {
  try {
    return encoded.split('/').map(decodeURIComponent).join('/');
  } catch {
    return undefined;
  }
}

export function createSignedUrl(origin: string, secret: string, fields: SignedFields): string {
  const query = new URLSearchParams();
  query.set(PARAM.contentType, fields.contentType);
  if (fields.sizeBytes !== undefined) query.set(PARAM.sizeBytes, String(fields.sizeBytes));
  if (fields.filename !== undefined) query.set(PARAM.filename, fields.filename);
  if (fields.etag !== undefined) query.set(PARAM.etag, fields.etag);
  query.set(PARAM.expiresAt, String(fields.expiresAt));
  query.set(PARAM.signature, sign(secret, fields));
  return `${origin.replace(/\/+$/, '')}${STORAGE_ROUTE_PREFIX}${encodeKeyPath(fields.key)}?${query.toString()}`;
}

export const invalid = () =>
  new ApiError('invalid_signature', 'The signed URL is invalid or has been tampered with');

/** The methods a URL signed for `method` takes (a download's GET serves HEAD too), for `Allow`. */
const ALLOWED: Record<SignedMethod, string[]> = { PUT: ['PUT'], GET: ['GET', 'HEAD'] };

const wrongMethod = (signedFor: SignedMethod) =>
  new ApiError(
    'method_not_allowed',
    signedFor === 'PUT'
      ? 'This signed URL is for an upload: send the file with PUT'
      : 'This signed URL is for a download: fetch it with GET',
    { allow: ALLOWED[signedFor] },
  );

/** Whether `signature` is the one for `fields`, compared in constant time. */
function signatureMatches(secret: string, fields: SignedFields, signature: string): boolean {
  // An upload is signed with its size, a download with its version: without it, no URL of ours.
  if (fields.method === 'PUT' ? fields.sizeBytes === undefined : fields.etag === undefined) return false;
  const expected = Buffer.from(sign(secret, fields));
  const presented = Buffer.from(signature);
  return presented.length === expected.length && timingSafeEqual(presented, expected);
}

/**
 * Checks a signed URL's query against the method and storage path of the request. A signature
 * that does not match → 403 invalid_signature; a valid one past its expiry → 403 url_expired.
 * One that matches the other method (an upload URL sent with GET, a download URL with PUT) is a
 * URL of ours used the wrong way → 405 method_not_allowed with the method it is for, or, past
 * its expiry, the same 403 url_expired as with the right method: telling this apart computes the
 * other method's HMAC, which says nothing to whoever has no URL signed by this server.
 */
export function verifySignedUrl(
  secret: string,
  method: SignedMethod,
  key: string,
  query: Record<string, unknown>,
  now: Date,
): SignedFields {
  if (Object.keys(query).some((name) => !SIGNED_PARAMS.has(name))) throw invalid();
  const text = (name: string) => (typeof query[name] === 'string' ? (query[name] as string) : undefined);
  const contentType = text(PARAM.contentType);
  const expiresRaw = text(PARAM.expiresAt);
  const signature = text(PARAM.signature);
  const sizeRaw = text(PARAM.sizeBytes);
  const filename = text(PARAM.filename);
  const etag = text(PARAM.etag);
  if (contentType === undefined || !expiresRaw || !signature || !/^\d{1,12}$/.test(expiresRaw))
    throw invalid();
  if (sizeRaw !== undefined && !/^\d{1,15}$/.test(sizeRaw)) throw invalid();
  const fields: SignedFields = {
    method,
    key,
    contentType,
    sizeBytes: sizeRaw === undefined ? undefined : Number(sizeRaw),
    filename,
    etag,
    expiresAt: Number(expiresRaw),
  };
  if (!signatureMatches(secret, fields, signature)) {
    const other: SignedMethod = method === 'PUT' ? 'GET' : 'PUT';
    if (!signatureMatches(secret, { ...fields, method: other }, signature)) throw invalid();
    // Retrying with the right method would only meet the expiry: say that now, not 405.
    if (hasExpired(fields, now)) throw expired(fields);
    throw wrongMethod(other);
  }
  if (hasExpired(fields, now)) throw expired(fields);
  return fields;
}

const hasExpired = (fields: SignedFields, now: Date) => now.getTime() >= fields.expiresAt * 1000;

const expired = (fields: SignedFields) =>
  new ApiError('url_expired', 'The signed URL has expired', {
    expiredAt: new Date(fields.expiresAt * 1000).toISOString(),
  });
