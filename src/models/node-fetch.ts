import http from 'node:http';
import https from 'node:https';
import { finished } from 'node:stream';
import { ApiError } from '../errors.js';
import { type TextEventListener, TextEventFilter, textEventListenerOf } from './text-events.js';

type Fetch = typeof fetch;

const NULL_BODY_STATUS = new Set([101, 204, 205, 304]);

function responseHeaders(raw: http.IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  return headers;
}

/** What an event-stream body ends with when it breaks mid-way; undefined: it fails instead. */
export type BrokenBodyEnd = (error: unknown) => Uint8Array | undefined;

/** The event-stream bodies this fetch made, with how to set what they end with when broken. */
const breakableBodies = new WeakMap<ReadableStream<Uint8Array>, (end: BrokenBodyEnd) => void>();

/**
 * Makes an event-stream body of this fetch end with `end`'s bytes when it breaks mid-way,
 * rather than fail: what `guardedFetch` (stream-guard.ts) otherwise does with a relay stream,
 * one more web stream per network read. False for a body from another fetch.
 */
export function endBrokenBodyWith(body: ReadableStream<Uint8Array>, end: BrokenBodyEnd): boolean {
  const set = breakableBodies.get(body);
  set?.(end);
  return set !== undefined;
}

/**
 * An event-stream response body as a web stream, as `Readable.toWeb` makes it (a 16 KiB byte
 * queue, paused above it; a premature close fails it as an AbortError), able to end with given
 * bytes instead of failing (endBrokenBodyWith). With a listener, the model step's plain text
 * events are held back for it (text-events.ts).
 */
function eventStreamBody(
  response: http.IncomingMessage,
  listener: TextEventListener | undefined,
): ReadableStream<Uint8Array> {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let brokenEnd: BrokenBodyEnd | undefined;
  let cancelled = false;
  const filter = listener && new TextEventFilter(listener);
  /** The text the filter still holds, given to the provider before the body ends. */
  const releaseHeld = () => {
    const rest = filter?.end();
    if (rest) controller.enqueue(Buffer.from(rest));
  };
  response.pause();
  response.on('data', (chunk: Buffer) => {
    if (!filter) controller.enqueue(chunk);
    else {
      const given = filter.write(chunk);
      if (given !== '') controller.enqueue(Buffer.from(given));
    }
    if ((controller.desiredSize ?? 0) <= 0) response.pause();
  });
  const cleanup = finished(response, (error) => {
    cleanup();
    // Legacy streams may emit `error` again after `finished`.
    response.on('error', () => undefined);
    if (cancelled) return;
    if (!error) {
      releaseHeld();
      controller.close();
      return;
    }
    const failure =
      (error as NodeJS.ErrnoException).code === 'ERR_STREAM_PREMATURE_CLOSE'
        ? new DOMException('The operation was aborted', 'AbortError')
        : error;
    const last = brokenEnd?.(failure);
    if (last === undefined) {
      controller.error(failure);
      return;
    }
    releaseHeld();
    controller.enqueue(last);
    controller.close();
  });
  const body = new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
      },
      pull() {
        response.resume();
      },
      cancel(reason) {
        cancelled = true;
        response.destroy(reason instanceof Error ? reason : undefined);
      },
    },
    { highWaterMark: 16 * 1024, size: (chunk) => chunk.byteLength },
  );
  breakableBodies.set(body, (end) => {
    brokenEnd = end;
  });
  return body;
}

function abortError(): DOMException {
  return new DOMException('This operation was aborted', 'AbortError');
}

/**
 * A status of three digits the Fetch API's Response cannot carry (it takes 200–599): Node's HTTP
 * parser passes any on (1xx ones aside). The AI SDK reads a status it cannot use as the
 * provider's failure, as for a 5xx.
 */
function invalidStatus(status: number): ApiError {
  return new ApiError('upstream_error', `The model provider answered HTTP ${status}`, {
    providerStatus: status,
  });
}

/**
 * `new Response(body, init)`, or the answer refused when the Fetch API cannot carry it (a reason
 * phrase with a control character): it throws, and a throw in the response's event handlers
 * reaches nothing but the process, which it ended.
 */
function fetchResponse(body: BodyInit | null, init: ResponseInit): Response | ApiError {
  try {
    return new Response(body, init);
  } catch (error) {
    return new ApiError(
      'upstream_error',
      "The model provider's answer is not an HTTP response Atrium can read",
      {},
      { cause: error },
    );
  }
}

function tooLarge(maxBytes: number): ApiError {
  return new ApiError(
    'upstream_error',
    `The model provider's response is larger than ${maxBytes} bytes (ATRIUM_MAX_PROVIDER_RESPONSE_BYTES)`,
    { maxBytes },
  );
}

/**
 * A `fetch` for model providers on `node:http` with keep-alive agents. Node 20's built-in
 * fetch (undici) costs about 0.5 ms more per call, which is most of what Atrium may add to a
 * chat. It covers what the AI SDK providers send (string or byte bodies, no redirects) and
 * falls back to the built-in fetch for anything else. Event streams are returned as streams;
 * other bodies are read whole first, up to `maxResponseBytes` (a larger one fails with 502
 * `upstream_error` as soon as it passes the limit, so a broken or hostile provider cannot fill
 * the memory). Failures look like the built-in fetch's (`TypeError: fetch failed` with the
 * cause; `AbortError`), so the SDK classifies them the same way.
 */
export function createNodeFetch(maxResponseBytes: number): Fetch {
  const agents = {
    'http:': new http.Agent({ keepAlive: true }),
    'https:': new https.Agent({ keepAlive: true }),
  };
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const body = init?.body;
    const simpleBody =
      body === undefined || body === null || typeof body === 'string' || body instanceof Uint8Array;
    if (input instanceof Request || !simpleBody || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      return fetch(input, init);
    }
    const signal = init?.signal ?? undefined;
    if (signal?.aborted) throw abortError();
    const textEvents = textEventListenerOf(signal);
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const transport = url.protocol === 'https:' ? https : http;
    return new Promise<Response>((resolve, reject) => {
      const request = transport.request(url, {
        method: init?.method ?? 'GET',
        headers,
        agent: agents[url.protocol as 'http:' | 'https:'],
      });
      let streamedBody: http.IncomingMessage | undefined;
      const onAbort = () => {
        // A streamed body must fail with an AbortError too: the AI SDK then ends the reply with
        // an abort (a stop) instead of a provider failure.
        streamedBody?.destroy(abortError());
        request.destroy(abortError());
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const cleanup = () => signal?.removeEventListener('abort', onAbort);
      request.on('error', (error) => {
        cleanup();
        reject(signal?.aborted ? abortError() : new TypeError('fetch failed', { cause: error }));
      });
      request.on('response', (response) => {
        const status = response.statusCode ?? 502;
        const fail = (error: ApiError) => {
          cleanup();
          // Rejected first: destroying the response emits `aborted` at once.
          reject(error);
          response.destroy();
        };
        // Checked here, not left to `new Response`: its throw in this handler ended the process.
        if (status < 200 || status > 599) {
          fail(invalidStatus(status));
          return;
        }
        const init = {
          status,
          statusText: response.statusMessage,
          headers: responseHeaders(response.headers),
        };
        // A null-body status has no body to stream (Response refuses one): read as any other.
        if (
          response.headers['content-type']?.includes('text/event-stream') &&
          !NULL_BODY_STATUS.has(status)
        ) {
          const streamed = fetchResponse(eventStreamBody(response, textEvents), init);
          if (streamed instanceof ApiError) {
            fail(streamed);
            return;
          }
          streamedBody = response;
          response.on('close', cleanup);
          resolve(streamed);
          return;
        }
        if (Number(response.headers['content-length'] ?? 0) > maxResponseBytes) {
          fail(tooLarge(maxResponseBytes));
          return;
        }
        const chunks: Buffer[] = [];
        let received = 0;
        response.on('data', (chunk: Buffer) => {
          received += chunk.length;
          if (received > maxResponseBytes) fail(tooLarge(maxResponseBytes));
          else chunks.push(chunk);
        });
        response.on('end', () => {
          const whole = fetchResponse(NULL_BODY_STATUS.has(status) ? null : Buffer.concat(chunks), init);
          if (whole instanceof ApiError) {
            fail(whole);
            return;
          }
          cleanup();
          resolve(whole);
        });
        response.on('error', (error) => {
          cleanup();
          reject(signal?.aborted ? abortError() : new TypeError('fetch failed', { cause: error }));
        });
        response.on('aborted', () => {
          cleanup();
          reject(new TypeError('fetch failed', { cause: new Error('the connection closed mid-body') }));
        });
      });
      request.end(body ?? undefined);
    });
  };
}
