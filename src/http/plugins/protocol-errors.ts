import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { HttpTimeouts } from '../../config.js';
import { ApiError, errors } from '../../errors.js';

/** Node's header size limit (`maxHeaderSize`), which Atrium keeps. */
const MAX_HEADER_BYTES = 16 * 1024;

/** A failure of Node's HTTP parser (`HPE_…`) or of its header deadline, as the API error it stands for. */
export function clientErrorToApiError(code: string | undefined, timeouts: HttpTimeouts): ApiError {
  switch (code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ApiError(
        'request_timeout',
        `The request headers did not arrive within ${timeouts.headersTimeoutMs} ms`,
        { headersTimeoutMs: timeouts.headersTimeoutMs },
      );
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError('headers_too_large', `The request headers exceed ${MAX_HEADER_BYTES} bytes`, {
        maxBytes: MAX_HEADER_BYTES,
      });
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
    case 'HPE_INVALID_CONTENT_LENGTH':
    case 'HPE_INVALID_TRANSFER_ENCODING':
      return errors.badRequest(
        'The body framing is invalid: a bad Content-Length, a bad Transfer-Encoding, or both at once',
      );
    case 'HPE_INVALID_URL':
    case 'HPE_INVALID_METHOD':
    case 'HPE_INVALID_VERSION':
      return errors.badRequest('The request line is malformed (method, path or HTTP version)');
    default:
      return errors.badRequest('The request is not valid HTTP');
  }
}

function rawResponse(error: ApiError): string {
  const body = JSON.stringify({ code: error.code, message: error.message, details: error.details });
  const reason =
    error.status === 408
      ? 'Request Timeout'
      : error.status === 431
        ? 'Request Header Fields Too Large'
        : 'Bad Request';
  return (
    `HTTP/1.1 ${error.status} ${reason}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}

/**
 * Fastify's `clientErrorHandler`: requests Node refuses before any route sees them (malformed,
 * headers too large or too slow) are answered with the error body, not Fastify's own shape.
 * They are the client's doing, so they are logged without a stack.
 */
export function createClientErrorHandler(timeouts: HttpTimeouts) {
  return function onClientError(
    this: FastifyInstance,
    error: Error & { code?: string },
    socket: Socket,
  ): void {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const apiError = clientErrorToApiError(error.code, timeouts);
    this.log.info({ code: apiError.code, reason: error.code }, apiError.message);
    // Once a response on this connection has begun, more bytes would corrupt it: close only.
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (socket.writable && !inFlight?.headersSent) socket.write(rawResponse(apiError));
    socket.destroy();
  };
}

/**
 * HTTP/1.1 requires a Host header. Node's own check answers a bare 400; it is turned off
 * (`requireHostHeader: false`) so that this one answers with the error body.
 */
export function registerHostCheck(app: FastifyInstance): void {
  // Callback style: it waits on nothing, so no promise per request.
  app.addHook('onRequest', (request, _reply, done) => {
    const raw = request.raw;
    const missingHost =
      raw.httpVersionMajor === 1 && raw.httpVersionMinor >= 1 && raw.headers.host === undefined;
    done(missingHost ? errors.badRequest('The Host header is required (HTTP/1.1)') : undefined);
  });
}

/**
 * An `Expect` other than `100-continue`: Node answers it with a bare 417, no error body and no
 * request id, before any route sees it. RFC 9110 §10.1.1 lets a server answer 417 (MAY), not
 * oblige it; the request is served as if it had no such expectation, so whatever it gets is an
 * answer of the API (a `100-continue` among other expectations is Node's `checkContinue`, and
 * unaffected).
 */
export function ignoreUnknownExpectations(app: FastifyInstance): void {
  app.server.on('checkExpectation', (request, response) => app.server.emit('request', request, response));
}
