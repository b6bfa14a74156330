import { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppDeps } from '../../deps.js';
import { ApiError, errors } from '../../errors.js';
import { pathFault } from '../../path-names.js';
import { contentDisposition } from '../../storage/content-disposition.js';
import { normalizeMediaType } from '../../storage/media-type.js';
import { preconditionFailed } from '../../storage/object-store.js';
import {
  decodeKeyPath,
  invalid as invalidSignature,
  STORAGE_ROUTE_PREFIX,
  verifySignedUrl,
} from '../../storage/signed-url.js';
import { MAX_FILE_BYTES } from '../../limits.js';
import type { SwaggerTransform } from '@fastify/swagger';
import { errorResponses } from '../schemas/common.js';
import { headerDoc, REQUEST_ID_HEADER, withHeaders } from '../schemas/headers.js';
import { StoredObjectResponse } from '../schemas/project-files.js';
import type { TypedApp } from '../typed-app.js';
import { contentEncodingError } from '../content-encoding.js';
import { downloadPreconditions, uploadPreconditions } from '../preconditions.js';

const ObjectBytes = Type.Unsafe<Readable>({
  type: 'string',
  format: 'binary',
  description: 'The object bytes',
});

/** Fastify's name for the rest of the path after the prefix. */
const WildcardParams = Type.Object({ '*': Type.String() });

/** What the document calls that wildcard: a named parameter clients can fill in. */
const StoragePathParams = Type.Object({
  path: Type.String({
    description:
      'The storage path (`storagePath`). Either with its `/` separators and each segment percent-encoded (how signed URLs spell it), or as one percent-encoded segment (`/` as `%2F`, what generated clients send): both name the same object.',
    examples: ['projects/wsp_demo/prj_1/notes.md'],
  }),
});

const signedField = (description: string, example: string) =>
  Type.Optional(Type.String({ description, examples: [example] }));

/** The query a signed URL carries; every field is covered by the signature. */
const SignedQuery = Type.Object({
  contentType: signedField('The Content-Type the URL was signed for', 'text/markdown'),
  size: signedField('Upload URLs: the exact byte count the upload must have', '1024'),
  filename: signedField('Download URLs: the file name for Content-Disposition', 'notes.md'),
  version: signedField(
    'Download URLs: the ETag of the version the URL serves',
    'd41d8cd98f00b204e9800998ecf8427e',
  ),
  expires: signedField('Expiry, Unix seconds', '1893456000'),
  signature: signedField('HMAC-SHA256 of the other fields, method and path', 'b64url…'),
});

const requestHeader = (description: string, example: string) =>
  Type.Optional(Type.String({ description, examples: [example] }));

/**
 * The request headers the routes read themselves (docs/files.md, preconditions.ts), declared in
 * the document only: a generated client sends only the header parameters the document names.
 */
const DownloadRequestHeaders = Type.Object({
  Range: requestHeader(
    'One byte range (`bytes=a-b`, `bytes=a-`, `bytes=-n`): 206 with `Content-Range`; any other is ignored (200, the whole object)',
    'bytes=0-1023',
  ),
  'If-Range': requestHeader(
    'Honour `Range` only for this `ETag` (another version: 200, the whole object)',
    '"d41d8cd98f00b204e9800998ecf8427e"',
  ),
  'If-Match': requestHeader(
    'Only this version: an `ETag` (compared strongly) or `*`; otherwise 412 `precondition_failed`',
    '"d41d8cd98f00b204e9800998ecf8427e"',
  ),
  'If-None-Match': requestHeader(
    '304 when it holds this version (`*`, or its `ETag`, weak or not)',
    '"d41d8cd98f00b204e9800998ecf8427e"',
  ),
  'If-Modified-Since': requestHeader(
    'Without `If-None-Match`: 304 when not modified since this HTTP date',
    'Wed, 21 Oct 2026 07:28:00 GMT',
  ),
  'If-Unmodified-Since': requestHeader(
    'Without `If-Match`: only if not modified since this HTTP date; otherwise 412 `precondition_failed`',
    'Wed, 21 Oct 2026 07:28:00 GMT',
  ),
});
const UploadRequestHeaders = Type.Object({
  'If-Match': requestHeader(
    'Store only over this version (an `ETag`, compared strongly, or `*`: any object); otherwise 412 `precondition_failed`, nothing stored',
    '"d41d8cd98f00b204e9800998ecf8427e"',
  ),
  'If-None-Match': requestHeader(
    '`*`: store only when no object is at the path (an `ETag`: unless it is this version); otherwise 412 `precondition_failed`, nothing stored',
    '*',
  ),
  'If-Unmodified-Since': requestHeader(
    'Without `If-Match`: store only over an object not modified since this HTTP date; otherwise 412 `precondition_failed`',
    'Wed, 21 Oct 2026 07:28:00 GMT',
  ),
});

/**
 * The router matches `/storage/objects/*`; the document shows that wildcard as `{path}`, a real
 * parameter, so that generated clients build a working URL (with `{*}` they send `%7B*%7D`).
 */
function documentWildcardAsPath(extra: Record<string, unknown>): SwaggerTransform {
  return ({ schema, url }) => ({
    url: url.replace(/\*$/, ':path'),
    schema: { ...schema, params: StoragePathParams, ...extra },
  });
}

const DOWNLOAD_HEADERS = {
  'content-type': headerDoc('The Content-Type the URL was signed for'),
  'content-length': headerDoc('Bytes in this response', 'integer'),
  'content-disposition': headerDoc('`attachment` with the file name'),
  etag: headerDoc('The stored version (quoted)'),
  'last-modified': headerDoc('When the object was stored'),
  'accept-ranges': headerDoc('`bytes`: a single `Range` is honoured'),
  'x-request-id': REQUEST_ID_HEADER,
};

const objectResponse = (description: string, headers: Record<string, unknown>) => ({
  description,
  headers,
  content: { '*/*': { schema: { type: 'string', format: 'binary' } } },
});

/** The storage path a signed URL names (the part after `/storage/objects/`), decoded. */
/**
 * Bounds of a path the local store can hold (Linux: 255 bytes a name, 4,096 a path); the keys
 * Atrium signs keep well within them.
 */
const STORABLE_KEY = {
  allowControl: true,
  allowInvisible: true,
  maxSegmentBytes: 255,
  maxBytes: 4_000,
} as const;

function requestedKey(request: FastifyRequest): string {
  const rawPath = request.url.split('?')[0]!;
  const key = decodeKeyPath(rawPath.slice(STORAGE_ROUTE_PREFIX.length));
  if (!key) throw new ApiError('invalid_signature', 'The signed URL is invalid or has been tampered with');
  return key;
}

/**
 * After the signature: a path altered in a signed URL is tampered (403, from the check); one
 * signed as it is (only the signing secret makes such a URL) is refused here rather than by the
 * store with a 500.
 */
function requireStorableKey(key: string): void {
  if (pathFault(key, STORABLE_KEY)) throw errors.badRequest('The URL names no valid storage path');
}

/**
 * `bytes=a-b`, `bytes=a-`, `bytes=-n` within `size`. Anything else (several ranges, a range
 * past the end, garbage) is ignored and the whole object is served, as RFC 9110 allows.
 */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | undefined {
  const match = header ? /^bytes=(\d*)-(\d*)$/.exec(header.trim()) : null;
  if (!match || size === 0) return undefined;
  const [, from, to] = match;
  if (from === '' && to === '') return undefined;
  if (from === '') {
    const suffix = Number(to);
    if (suffix === 0) return undefined;
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(from);
  const end = to === '' ? size - 1 : Math.min(Number(to), size - 1);
  if (start >= size || end < start) return undefined;
  return { start, end };
}

const objectVersionGone = () =>
  new ApiError(
    'not_found',
    'The file this URL was issued for has been replaced or removed; request a new URL',
    {
      reason: 'version_changed',
    },
  );

/**
 * The Content-Type header of a PUT, taken from the request before Fastify looks at it: Fastify
 * answers one it cannot parse (empty, `;`) with its own 415 before any handler runs, where a
 * type other than the signed one is this route's 400 with `expected` and `received`.
 */
const sentContentTypes = new WeakMap<FastifyRequest['raw'], string>();

async function takeContentType(request: FastifyRequest): Promise<void> {
  const header = request.raw.headers['content-type'];
  if (header === undefined) return;
  sentContentTypes.set(request.raw, header);
  // Without it the scope's catch-all parser takes any body; the handler compares the header.
  delete request.raw.headers['content-type'];
}

/**
 * The URLs the fs backend signs, served without an API key (the signature is the credential):
 * `PUT` streams an upload into storage, `GET` serves a download with Range support. Registered
 * in a scope of its own, where every content type reaches the handler as the raw stream.
 */
export async function storageRoutes(app: TypedApp, deps: AppDeps): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));

  // A signed field given twice is a URL someone added to: tampered (403), not a malformed query
  // (the schema's 400).
  app.addHook('preValidation', async (request: FastifyRequest) => {
    const query = request.query as Record<string, unknown>;
    if (Object.values(query).some(Array.isArray)) throw invalidSignature();
  });

  app.put(
    `${STORAGE_ROUTE_PREFIX}*`,
    {
      // The per-file limit; the exact bound is the signed size.
      bodyLimit: MAX_FILE_BYTES,
      onRequest: takeContentType,
      schema: {
        summary: 'Upload an object through a signed URL (fs storage)',
        description:
          'The `uploadUrl` of an upload-URL request. Send exactly the declared number of bytes with the declared Content-Type (any other, a missing or a malformed one is 400 with `details.expected` and `details.received`), unencoded: a `Content-Encoding` other than `identity` is 415 and nothing is stored; no API key. `If-None-Match: *` stores only when no object is at the path, `If-Match` only over the version it names (`If-Unmodified-Since` without it): otherwise 412 `precondition_failed` with `details.etag` (the version in place, or null) and nothing is stored. A download URL sent with PUT is 405 with `Allow: GET, HEAD` (403 `url_expired` once it has expired).',
        operationId: 'uploadObject',
        security: [],
        tags: ['storage'],
        params: WildcardParams,
        querystring: SignedQuery,
        response: {
          200: withHeaders(StoredObjectResponse, 'Stored', {
            etag: headerDoc('The stored version (quoted)'),
          }),
          ...errorResponses(400, 403, 404, 405, 408, 412, 413, 415, 431, 500),
        },
      },
      config: {
        // The body is the raw stream, not validated, so only the document declares it.
        swaggerTransform: documentWildcardAsPath({
          headers: UploadRequestHeaders,
          body: { ...ObjectBytes, description: 'Exactly `size` bytes' },
          consumes: ['application/octet-stream'],
        }),
      },
    },
    async (request, reply) => {
      const key = requestedKey(request);
      const signed = verifySignedUrl(deps.config.signingSecret, 'PUT', key, request.query, deps.clock());
      requireStorableKey(key);
      const declaredSize = signed.sizeBytes!;
      const sent = sentContentTypes.get(request.raw);
      const expected = normalizeMediaType(signed.contentType);
      if (!sent || !expected || normalizeMediaType(sent) !== expected) {
        throw new ApiError(
          'bad_request',
          `Content-Type must be "${signed.contentType}", as declared for this upload URL`,
          {
            expected: signed.contentType,
            received: sent ?? null,
          },
        );
      }
      const encoded = contentEncodingError(request.headers);
      if (encoded) throw encoded;
      const lengthHeader = request.headers['content-length'];
      if (lengthHeader !== undefined) {
        const length = Number(lengthHeader);
        if (length > declaredSize) {
          throw errors.payloadTooLarge(
            `The body is larger than the declared ${declaredSize} bytes; nothing was stored`,
            {
              maxBytes: declaredSize,
            },
          );
        }
        if (length < declaredSize) {
          throw errors.badRequest(`Content-Length is ${length} but ${declaredSize} bytes were declared`);
        }
      }
      // Checked before the body is read (a refused upload costs the client no bytes), and again
      // by the store when the bytes are ready, against whatever is in place then.
      const condition = uploadPreconditions(request.headers);
      if (condition) {
        const current = await deps.store.head(key);
        if (!condition.holds(current)) throw preconditionFailed(key, current);
      }
      const info = await deps.store.put(key, request.raw, {
        contentType: signed.contentType,
        exactBytes: declaredSize,
        condition,
      });
      reply.header('etag', `"${info.etag}"`);
      return { data: { storagePath: key, sizeBytes: info.size, etag: info.etag } };
    },
  );

  app.get(
    `${STORAGE_ROUTE_PREFIX}*`,
    {
      schema: {
        summary: 'Download an object through a signed URL (fs storage)',
        description:
          'The `downloadUrl` of a download-URL request. Supports a single byte `Range`; no API key. An upload URL sent with GET or HEAD is 405 with `Allow: PUT` (403 `url_expired` once it has expired).',
        operationId: 'downloadObject',
        security: [],
        tags: ['storage'],
        params: WildcardParams,
        querystring: SignedQuery,
        response: {
          200: ObjectBytes,
          206: ObjectBytes,
          304: Type.Null(),
          ...errorResponses(400, 403, 404, 405, 408, 412, 431, 500),
        },
      },
      config: {
        swaggerTransform: documentWildcardAsPath({
          headers: DownloadRequestHeaders,
          response: {
            200: objectResponse('The whole object', DOWNLOAD_HEADERS),
            206: objectResponse('The requested byte range', {
              ...DOWNLOAD_HEADERS,
              'content-range': headerDoc('`bytes start-end/size`'),
            }),
            // `type: 'null'`: no content (without it the document declared a JSON body of any shape).
            304: {
              type: 'null',
              description:
                'Not modified: an `If-None-Match` or `If-Modified-Since` holds this version (no body)',
              headers: {
                etag: DOWNLOAD_HEADERS.etag,
                'last-modified': DOWNLOAD_HEADERS['last-modified'],
                'cache-control': headerDoc('`private, max-age=0`'),
                'x-request-id': REQUEST_ID_HEADER,
              },
            },
            ...errorResponses(400, 403, 404, 405, 408, 412, 431, 500),
          },
        }),
      },
    },
    async (request, reply) => {
      const key = requestedKey(request);
      const signed = verifySignedUrl(deps.config.signingSecret, 'GET', key, request.query, deps.clock());
      requireStorableKey(key);
      const head = await deps.store.head(key);
      if (!head) throw errors.notFound('Object');
      // The URL serves one version: after a delete and a new upload at the same path, or a
      // replacement, the bytes there are another file's.
      if (head.etag !== signed.etag) throw objectVersionGone();
      const preconditions = downloadPreconditions(request.headers, head);
      if (preconditions === 'failed') {
        throw new ApiError(
          'precondition_failed',
          'The file is not the version the request is conditional on (If-Match, If-Unmodified-Since)',
          { etag: head.etag },
        );
      }
      if (preconditions === 'not-modified') {
        return reply
          .code(304)
          .header('etag', `"${head.etag}"`)
          .header('last-modified', head.lastModified.toUTCString())
          .header('cache-control', 'private, max-age=0')
          .send(null);
      }
      // RFC 9110 13.1.5: a Range under an If-Range that names another version is ignored (a
      // date is never compared: the whole object is always a safe answer).
      const ifRange = request.headers['if-range'];
      const range =
        ifRange === undefined || ifRange === `"${head.etag}"`
          ? parseRange(request.headers.range, head.size)
          : undefined;
      // HEAD: headers only; an empty stream keeps our Content-Length (Fastify would set 0).
      const object =
        request.method === 'HEAD'
          ? { body: Readable.from([]), info: head }
          : await deps.store.get(key, range);
      if (!object) throw errors.notFound('Object');
      if (object.info.etag !== signed.etag) {
        object.body.destroy();
        throw objectVersionGone();
      }
      const size = object.info.size;
      reply
        .header('content-type', signed.contentType)
        .header(
          'content-disposition',
          contentDisposition(signed.filename ?? key.slice(key.lastIndexOf('/') + 1)),
        )
        .header('accept-ranges', 'bytes')
        .header('etag', `"${object.info.etag}"`)
        .header('last-modified', object.info.lastModified.toUTCString())
        .header('cache-control', 'private, max-age=0')
        .header('x-content-type-options', 'nosniff')
        // Uploaded HTML or SVG must never run as a page of this origin, even if opened inline.
        .header('content-security-policy', "default-src 'none'; sandbox");
      if (range && range.end < size) {
        reply
          .code(206)
          .header('content-range', `bytes ${range.start}-${range.end}/${size}`)
          .header('content-length', String(range.end - range.start + 1));
      } else {
        reply.header('content-length', String(size));
      }
      return reply.send(object.body);
    },
  );
}
