import { withBodyCancelledOnAbort } from '../../abort-cancels-body.js';

/**
 * The most one HTTP response of an MCP server may bring (an `initialize`, a `tools/list` page, a
 * `tools/call` result, an error body, the session's event stream). Four times what a tool result
 * may keep (MAX_MCP_TOOL_OUTPUT_CHARS in mcp-output.ts): a result somewhat past that is cut and
 * still useful; one far past it fails. Reading stops at the limit, so a hostile or broken server
 * costs a reply a few MiB at most (a 48 MiB result used to take about 600 MiB).
 */
export const MAX_MCP_RESPONSE_BYTES = 4 * 1024 * 1024;

function tooLargeMessage(maxBytes: number): string {
  return `The MCP server's response is larger than ${maxBytes} bytes, the most Atrium reads of one response; nothing of it was used`;
}

/**
 * A response refused unread for its `content-length`. It keeps the response's headers: an
 * `initialize` answered so still opened the session its `mcp-session-id` names (sessionEnding).
 */
export class McpResponseTooLarge extends Error {
  constructor(
    maxBytes: number,
    readonly headers: Headers,
  ) {
    super(tooLargeMessage(maxBytes));
  }
}

/** The JSON-RPC id of the request a transport `POST` carries; undefined for anything else. */
function requestId(init: RequestInit | undefined): string | number | undefined {
  if (init?.method !== 'POST' || typeof init.body !== 'string') return undefined;
  try {
    const id = (JSON.parse(init.body) as { id?: unknown }).id;
    return typeof id === 'string' || typeof id === 'number' ? id : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What a response body is piped through: it fails once the body has brought more than
 * `maxBytes`. An event stream answering a request ends instead with a JSON-RPC error for that
 * request: the transport reads such a stream in the background and only logs its failure, so the
 * call waiting on it would wait until the reply's idle timeout; the error event fails the call at
 * once, with the reason. (The leading blank lines end an event cut short, which the transport
 * then drops as unparsable.)
 */
function bodyCounter(
  maxBytes: number,
  eventStreamFor: string | number | undefined,
): TransformStream<Uint8Array, Uint8Array> {
  let received = 0;
  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      received += chunk.byteLength;
      if (received <= maxBytes) {
        controller.enqueue(chunk);
        return;
      }
      if (eventStreamFor === undefined) {
        controller.error(new Error(tooLargeMessage(maxBytes)));
        return;
      }
      const error = {
        jsonrpc: '2.0',
        id: eventStreamFor,
        error: { code: -32000, message: tooLargeMessage(maxBytes) },
      };
      controller.enqueue(new TextEncoder().encode(`\n\ndata: ${JSON.stringify(error)}\n\n`));
      // Ends the stream and cancels the server's body: the connection is closed.
      controller.terminate();
    },
  });
}

/**
 * `fetch` for the MCP transport (@ai-sdk/mcp reads each response whole, or a whole event
 * stream, with no limit of its own): every response body is read up to MAX_MCP_RESPONSE_BYTES,
 * counted as it arrives, and a larger one fails the request it answers. The `DELETE` that ends a
 * session gets a time limit: the transport sends it on close with no signal of its own, so a
 * server that never answers it would hold the reply's close for undici's 300 s (a call's other
 * requests carry the reply's signal, and a tool call its time bound: mcp-call-limit.ts).
 */
export function mcpTransportFetch(
  timeoutMs: number,
  fetch: typeof globalThis.fetch,
  maxBytes = MAX_MCP_RESPONSE_BYTES,
): typeof globalThis.fetch {
  return async (input, init) => {
    const response = await fetch(
      input,
      init?.method === 'DELETE' && !init.signal ? { ...init, signal: AbortSignal.timeout(timeoutMs) } : init,
    );
    if (!response.body) return response;
    if (Number(response.headers.get('content-length') ?? 0) > maxBytes) {
      await response.body.cancel().catch(() => {});
      throw new McpResponseTooLarge(maxBytes, response.headers);
    }
    const eventStream = response.headers.get('content-type')?.includes('text/event-stream') ?? false;
    // The request's abort (a call's time bound, a stop) cancels the body itself: Node's fetch
    // loses it after a collection for the transport's `redirect: 'error'` (abort-cancels-body.ts).
    return withBodyCancelledOnAbort(
      response,
      init?.signal ?? undefined,
      bodyCounter(maxBytes, eventStream ? requestId(init) : undefined),
    );
  };
}

/** The JSON-RPC method a transport `POST` carries; undefined for anything else. */
function requestMethod(init: RequestInit | undefined): string | undefined {
  if (init?.method !== 'POST' || typeof init.body !== 'string') return undefined;
  try {
    const method = (JSON.parse(init.body) as { method?: unknown }).method;
    return typeof method === 'string' ? method : undefined;
  } catch {
    return undefined;
  }
}

/**
 * How many requests may be kept open at once, process-wide, after their caller gave up
 * (outlivingAbort), each with what its late answer starts (the session's `DELETE`): each holds a
 * connection for up to its bound, so without a limit a slow or hostile server, asked again on
 * every turn, would hold one more each time. Past the limit, a request is closed when its caller
 * gives up, as any other is.
 */
export class LateAnswerWaits {
  private open = 0;

  constructor(readonly max: number) {}

  /** How many are held now. */
  get size(): number {
    return this.open;
  }

  /** One wait, with what gives it back (once); undefined when all are held. */
  take(): (() => void) | undefined {
    if (this.open >= this.max) return undefined;
    this.open++;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.open--;
    };
  }
}

/**
 * `start(signal)` (a request) whose caller's abort (`signal`) before the answer fails the call at
 * once, as fetch's own would, but not the request: it goes on for `lateMs` more, and `late` gets
 * the answer should it come in that time (else the request is aborted, which closes its
 * connection). An abort after the answer came reaches the request (and its body) as before. With
 * `waits`, the request goes on only while one of them is free (else it is aborted with its
 * caller), and holds it until what `late` does has settled too.
 */
function outlivingAbort<T>(
  signal: AbortSignal,
  start: (signal: AbortSignal) => Promise<T>,
  lateMs: number,
  waits: LateAnswerWaits | undefined,
  late: (answer: T) => Promise<void>,
): Promise<T> {
  signal.throwIfAborted();
  const request = new AbortController();
  let state: 'waiting' | 'answered' | 'abandoned' = 'waiting';
  let bound: NodeJS.Timeout | undefined;
  let giveBack: (() => void) | undefined;
  const settled = () => {
    clearTimeout(bound);
    giveBack?.();
  };
  // The wait is held until what the late answer starts has settled too; that is bounded on its
  // own (the session's `DELETE`: mcpTransportFetch).
  const lateAnswer = (answer: T) => {
    clearTimeout(bound);
    void late(answer)
      .catch(() => {})
      .finally(() => giveBack?.());
  };
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      if (state === 'answered') {
        request.abort(signal.reason);
        return;
      }
      state = 'abandoned';
      reject(signal.reason);
      giveBack = waits ? waits.take() : () => {};
      if (!giveBack) {
        request.abort(signal.reason);
        return;
      }
      bound = setTimeout(
        () => request.abort(new Error(`no answer within ${lateMs} ms after its caller gave up`)),
        lateMs,
      );
      // A process stopping is not held by the wait (the connection is, at most until the bound).
      bound.unref();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    start(request.signal).then(
      (answer) => {
        if (state === 'abandoned') {
          lateAnswer(answer);
          return;
        }
        settled();
        state = 'answered';
        resolve(answer);
      },
      (error: unknown) => {
        settled();
        signal.removeEventListener('abort', onAbort);
        if (state === 'waiting') reject(error);
      },
    );
  });
}

interface OpenSession {
  url: string;
  headers: Headers;
}

/**
 * What a `POST` brought: its response, or the refusal of one too large to read, whose headers
 * may open a session all the same.
 */
type Answer = Response | McpResponseTooLarge;

/** The session an answer to a `POST` opens (its `mcp-session-id`), with what ending it takes. */
function sessionOpenedBy(
  input: Parameters<typeof globalThis.fetch>[0],
  init: RequestInit | undefined,
  answer: Answer,
): OpenSession | undefined {
  const sessionId = answer.headers.get('mcp-session-id');
  if (!sessionId || init?.method !== 'POST') return undefined;
  // The headers the client sends with every request (the agent's own ones included).
  const headers = new Headers(init.headers);
  headers.delete('content-type');
  headers.delete('accept');
  headers.set('mcp-session-id', sessionId);
  return { url: String(input), headers };
}

/**
 * `fetch` for one MCP client that notes the session its server opens (the `mcp-session-id` of an
 * answer), and `end()`, which ends that session with the `DELETE` a client's close sends, unless
 * one was sent already. For a connect that runs out of time after the server answered
 * `initialize` (its `notifications/initialized` still unanswered): @ai-sdk/mcp then closes its
 * transport without the `DELETE` (it skips it once the time is up) and throws, so there is no
 * client to close, and the server would keep the session until it expires it.
 *
 * A connect that runs out of time before the `initialize` answer came: @ai-sdk/mcp aborts that
 * request, which closed its connection, and a server that opened a session when it answered at
 * last kept it, unknown to Atrium (a slow server piled them up). The `initialize` request now
 * outlives that abort by up to `lateInitialize.ms` (while one of `lateInitialize.waits` is free:
 * else it is closed at once, as before): the connect fails at once all the same, and an
 * answer that comes within that time has its body cancelled (it is read no further, which closes
 * its connection) and the session it names ended with a `DELETE` (bounded as any `DELETE` is:
 * mcpTransportFetch), which keeps the wait taken until it settles. Nothing awaits this: not the
 * reply, not a shutdown.
 *
 * An answer refused unread for its size (McpResponseTooLarge) names its session as well: the
 * call fails with it, and the session is ended all the same.
 */
export function sessionEnding(
  fetch: typeof globalThis.fetch,
  lateInitialize: { ms: number; waits?: LateAnswerWaits },
): {
  fetch: typeof globalThis.fetch;
  end(): Promise<void>;
} {
  let open: OpenSession | undefined;
  const endSession = async ({ url, headers }: OpenSession) => {
    await fetch(url, { method: 'DELETE', headers, redirect: 'error' })
      .then((response) => response.body?.cancel())
      .catch(() => {});
  };
  const answer = (input: Parameters<typeof globalThis.fetch>[0], init: RequestInit | undefined) =>
    fetch(input, init).catch((error: unknown): Answer => {
      if (error instanceof McpResponseTooLarge) return error;
      throw error;
    });
  const lateAnswer =
    (input: Parameters<typeof globalThis.fetch>[0], init: RequestInit) =>
    async (late: Answer): Promise<void> => {
      if (late instanceof Response) void late.body?.cancel().catch(() => {});
      const session = sessionOpenedBy(input, init, late);
      if (session) await endSession(session);
    };
  return {
    fetch: async (input, init) => {
      if (init?.method === 'DELETE') open = undefined;
      const got =
        init?.signal && requestMethod(init) === 'initialize'
          ? await outlivingAbort(
              init.signal,
              (signal) => answer(input, { ...init, signal }),
              lateInitialize.ms,
              lateInitialize.waits,
              lateAnswer(input, init),
            )
          : await answer(input, init);
      open = sessionOpenedBy(input, init, got) ?? open;
      if (got instanceof McpResponseTooLarge) throw got;
      return got;
    },
    async end() {
      if (!open) return;
      const session = open;
      open = undefined;
      await endSession(session);
    },
  };
}
