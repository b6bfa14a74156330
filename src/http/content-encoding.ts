import type { FastifyInstance } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import { ApiError } from '../errors.js';

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * A request body under a content coding other than `identity` (gzip, br, …): 415 naming the coding
 * (RFC 9110 §15.5.16), or null. No route decodes one, so reading it as it is would parse compressed
 * bytes as JSON (a misleading "not valid JSON") or store them as an uploaded file.
 */
export function contentEncodingError(headers: IncomingHttpHeaders): ApiError | null {
  const header = headers['content-encoding'];
  if (header === undefined) return null;
  const coding = header
    .split(',')
    .map((item) => item.trim().toLowerCase())
    .find((item) => item !== '' && item !== 'identity');
  if (coding === undefined) return null;
  return new ApiError(
    'unsupported_media_type',
    `Content-Encoding ${coding.slice(0, 100)} is not supported; send the body unencoded (identity)`,
    { contentEncoding: header.slice(0, 200) },
  );
}

/**
 * In `scope`: a body sent with a content coding is refused (415) before it is parsed, after the
 * key check, where Fastify refuses a content type it cannot parse. Requests without a body pass.
 */
export function refuseContentEncodings(scope: FastifyInstance): void {
  scope.addHook('preParsing', (request, _reply, payload, done) => {
    const { headers } = request;
    const hasBody =
      headers['transfer-encoding'] !== undefined ||
      (headers['content-length'] !== undefined && headers['content-length'] !== '0');
    const error = BODY_METHODS.has(request.method) && hasBody ? contentEncodingError(headers) : null;
    if (error) done(error);
    else done(null, payload);
  });
}
