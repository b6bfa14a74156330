import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the fake upstream was sent, one entry per request. */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: {
    model?: string;
    messages?: Array<{ role: string; content: unknown; tool_calls?: unknown; tool_call_id?: string }>;
    temperature?: number;
    stream?: boolean;
    stream_options?: unknown;
    tools?: Array<{ type: string; function: { name: string; description?: string; parameters?: unknown } }>;
    [key: string]: unknown;
  };
}

export interface ToolCallScript {
  name: string;
  arguments: Record<string, unknown>;
  /** The arguments text as the model writes it, instead of `arguments`' JSON (e.g. broken JSON). */
  rawArguments?: string;
}

/** One reply of the fake upstream. Without a script, it answers `defaultText`. */
export type ReplyScript =
  | {
      kind: 'text';
      text: string;
      usage?: { prompt: number; completion: number };
      /** Sends no usage (a provider that ignores `stream_options.include_usage`). */
      noUsage?: boolean;
      /** The provider's finish reason (`stop` unless given): `length`, `content_filter`. */
      finishReason?: string;
      pieces?: string[];
      /** Streams one piece every `intervalMs` (a realistic token rate) instead of all at once. */
      intervalMs?: number;
      /** Called as each piece is written (benchmarks time its way to the client). */
      onPiece?: (piece: string) => void;
    }
  /**
   * Calls tools; after `delayMs` when given (a model slow to answer, within the timeout), with the
   * finish reason `tool_calls` unless `finishReason` gives another (OpenAI's `stop` for a forced
   * named function, as several OpenAI-compatible servers give for any call).
   */
  | { kind: 'tool-calls'; calls: ToolCallScript[]; delayMs?: number; finishReason?: string }
  /** Answers the HTTP status with an OpenAI-style error body. */
  | { kind: 'fail'; status: number; message?: string }
  /** Accepts the request and never answers (a stream sends its headers, then nothing). */
  | { kind: 'stall' }
  /** Streams `afterPieces` pieces of `text`, then destroys the connection. */
  | { kind: 'disconnect'; text: string; afterPieces: number }
  /** Streams `afterPieces` pieces of `text`, waits for `release()`, then streams the rest. */
  | { kind: 'held'; text: string; afterPieces: number }
  /**
   * Streams `afterPieces` pieces of `text`, then the event-stream text `event` as it is (an
   * error event, a line that is no JSON), then, with `thenFinish`, the rest of `text`, its
   * finish and usage (after `release()` when it is `'held'`); `[DONE]` either way. With
   * `reasoning`, its words come first, as `reasoning_content` (a reasoning model's thinking).
   */
  | {
      kind: 'inserted';
      text: string;
      afterPieces: number;
      event: string;
      thenFinish?: boolean | 'held';
      reasoning?: string;
    };

export interface FakeUpstream {
  /** `http://127.0.0.1:PORT/v1`, the baseURL a provider points at. */
  baseURL: string;
  requests: RecordedRequest[];
  /** Queues replies, used in order by the next requests. */
  enqueue(...replies: ReplyScript[]): void;
  /** The text answered when no reply is queued. */
  defaultText: string;
  /**
   * Chooses the reply from the request when no reply is queued (a model that keeps calling
   * tools until a request lets it call none); `undefined` from it answers `defaultText`.
   */
  respond?: (request: RecordedRequest) => ReplyScript | undefined;
  /** The last request, or a failure when there was none. */
  lastRequest(): RecordedRequest;
  /** Lets held replies (`kind: 'held'`) go on. */
  release(): void;
  /** Resolves when `count` requests have arrived. */
  waitForRequests(count: number): Promise<void>;
  /** Requests whose client went away before the answer ended (an aborted provider call). */
  aborted(): number;
  /** Resolves when `count` requests have been aborted by their client. */
  waitForAborted(count: number): Promise<void>;
  close(): Promise<void>;
}

export const DEFAULT_UPSTREAM_TEXT = 'Hello from the fake upstream.';

/**
 * A reply whose provider fails mid-stream but would go on: "one two ", then `event` (an error
 * event, a line that is no JSON), then the rest of the text and its finish once `release()`d.
 */
export function failsMidStreamThenGoesOn(event: string): ReplyScript {
  return { kind: 'inserted', text: 'one two three four', afterPieces: 2, event, thenFinish: 'held' };
}

function words(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [];
}

function chunk(
  id: string,
  model: string,
  delta: Record<string, unknown>,
  finishReason: string | null = null,
) {
  return `data: ${JSON.stringify({
    id,
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  })}\n\n`;
}

/**
 * Writes piece i at `i × intervalMs` after the first, on the clock rather than after the last
 * write, so a busy event loop does not slow the rate down; stops when the client goes away.
 */
function writePaced(
  res: ServerResponse,
  pieces: string[],
  intervalMs: number,
  onPiece: ((piece: string) => void) | undefined,
  event: (piece: string, index: number) => string,
): Promise<void> {
  const startedAt = performance.now();
  return new Promise((resolve, reject) => {
    const next = (i: number) => {
      if (res.destroyed) return reject(new Error('client went away'));
      if (i === pieces.length) return resolve();
      onPiece?.(pieces[i]!);
      res.write(event(pieces[i]!, i));
      setTimeout(() => next(i + 1), Math.max(0, startedAt + (i + 1) * intervalMs - performance.now()));
    };
    next(0);
  });
}

export function estimateUsage(body: RecordedRequest['body'], completion: number) {
  const prompt = Math.max(1, Math.ceil(JSON.stringify(body.messages ?? []).length / 4));
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/**
 * A real OpenAI-compatible HTTP server on 127.0.0.1 (chat completions, streamed or not) for
 * tests and benchmarks: it records every request and answers from a queue of scripts, so a
 * test forces failures by telling it to fail, never by sleeping.
 */
export async function startFakeUpstream(): Promise<FakeUpstream> {
  const requests: RecordedRequest[] = [];
  const queue: ReplyScript[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const stalled = new Set<ServerResponse>();
  const held: Array<() => void> = [];
  let counter = 0;
  let closing = false;

  let abortedCount = 0;
  const abortWaiters: Array<{ count: number; resolve: () => void }> = [];
  const handle = async (req: IncomingMessage, res: ServerResponse, raw: string) => {
    res.on('close', () => {
      if (res.writableEnded || closing) return;
      abortedCount++;
      for (const waiter of abortWaiters.filter((w) => abortedCount >= w.count)) {
        abortWaiters.splice(abortWaiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    });
    const body = raw ? (JSON.parse(raw) as RecordedRequest['body']) : {};
    const recorded: RecordedRequest = {
      method: req.method ?? '',
      path: req.url ?? '',
      headers: req.headers,
      body,
    };
    requests.push(recorded);
    for (const waiter of waiters.filter((w) => requests.length >= w.count)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error' } }));
      return;
    }
    const script: ReplyScript = queue.shift() ??
      upstream.respond?.(recorded) ?? { kind: 'text', text: upstream.defaultText };
    const id = `chatcmpl-${++counter}`;
    const model = body.model ?? 'fake';
    if (script.kind === 'tool-calls' && script.delayMs) {
      await new Promise((resolve) => setTimeout(resolve, script.delayMs));
    }

    if (script.kind === 'fail') {
      // Providers name each request; the id lets a log line be matched with the provider's.
      res.writeHead(script.status, { 'content-type': 'application/json', 'x-request-id': `upstream-${id}` });
      res.end(
        JSON.stringify({
          error: { message: script.message ?? 'upstream failure', type: 'server_error', code: null },
        }),
      );
      return;
    }
    if (script.kind === 'stall') {
      stalled.add(res);
      if (body.stream) res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
      return;
    }

    if (!body.stream) {
      let message: Record<string, unknown>;
      let finish = script.kind === 'text' ? (script.finishReason ?? 'stop') : 'stop';
      let completion = 0;
      if (script.kind === 'tool-calls') {
        finish = script.finishReason ?? 'tool_calls';
        message = {
          role: 'assistant',
          content: null,
          tool_calls: script.calls.map((call, i) => ({
            id: `call_${counter}_${i}`,
            type: 'function',
            function: { name: call.name, arguments: call.rawArguments ?? JSON.stringify(call.arguments) },
          })),
        };
        completion = 5;
      } else {
        const text = script.text;
        if (script.kind === 'held') {
          held.push(() => {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(
              JSON.stringify({
                id,
                object: 'chat.completion',
                created: 1_700_000_000,
                model,
                choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
                usage: estimateUsage(body, words(text).length),
              }),
            );
          });
          return;
        }
        message = { role: 'assistant', content: text };
        completion = words(text).length;
      }
      const usage =
        script.kind === 'text' && script.usage
          ? {
              prompt_tokens: script.usage.prompt,
              completion_tokens: script.usage.completion,
              total_tokens: script.usage.prompt + script.usage.completion,
            }
          : estimateUsage(body, completion);
      if (script.kind === 'disconnect') {
        req.socket.destroy();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created: 1_700_000_000,
          model,
          choices: [{ index: 0, message, finish_reason: finish }],
          ...(script.kind === 'text' && script.noUsage ? {} : { usage }),
        }),
      );
      return;
    }

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    if (script.kind === 'tool-calls') {
      script.calls.forEach((call, i) => {
        res.write(
          chunk(id, model, {
            role: 'assistant',
            tool_calls: [
              {
                index: i,
                id: `call_${counter}_${i}`,
                type: 'function',
                function: { name: call.name, arguments: call.rawArguments ?? JSON.stringify(call.arguments) },
              },
            ],
          }),
        );
      });
      res.write(chunk(id, model, {}, script.finishReason ?? 'tool_calls'));
      res.write(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [], usage: estimateUsage(body, 5) })}\n\n`,
      );
      res.end('data: [DONE]\n\n');
      return;
    }
    const pieces = script.kind === 'text' ? (script.pieces ?? words(script.text)) : words(script.text);
    const limit =
      script.kind === 'disconnect' || script.kind === 'held' || script.kind === 'inserted'
        ? script.afterPieces
        : pieces.length;
    const writePieces = (from: number, to: number) => {
      // One write per piece, like a real provider's token stream.
      for (let i = from; i < to; i++) {
        res.write(
          chunk(id, model, i === 0 ? { role: 'assistant', content: pieces[i] } : { content: pieces[i] }),
        );
      }
    };
    if (script.kind === 'inserted' && script.reasoning) {
      for (const [i, piece] of words(script.reasoning).entries()) {
        res.write(
          chunk(
            id,
            model,
            i === 0 ? { role: 'assistant', reasoning_content: piece } : { reasoning_content: piece },
          ),
        );
      }
    }
    const paced = script.kind === 'text' && script.intervalMs !== undefined;
    if (!paced) writePieces(0, limit);
    if (script.kind === 'disconnect') {
      // Let the pieces leave before the connection dies mid-stream.
      setImmediate(() => req.socket.destroy());
      return;
    }
    const finish = () => {
      res.write(chunk(id, model, {}, 'stop'));
      const usage = estimateUsage(body, pieces.length);
      res.write(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [], usage })}\n\n`,
      );
      res.end('data: [DONE]\n\n');
    };
    if (script.kind === 'held') {
      held.push(() => {
        writePieces(limit, pieces.length);
        finish();
      });
      return;
    }
    if (script.kind === 'inserted') {
      res.write(script.event);
      if (!script.thenFinish) {
        res.end('data: [DONE]\n\n');
        return;
      }
      const rest = () => {
        writePieces(limit, pieces.length);
        finish();
      };
      if (script.thenFinish === 'held') held.push(rest);
      else rest();
      return;
    }
    if (script.kind === 'text' && script.intervalMs !== undefined) {
      writePaced(res, pieces, script.intervalMs, script.onPiece, (piece, i) =>
        chunk(id, model, i === 0 ? { role: 'assistant', content: piece } : { content: piece }),
      ).then(finish, () => undefined);
      return;
    }
    res.write(chunk(id, model, {}, script.finishReason ?? 'stop'));
    if (script.noUsage) {
      res.end('data: [DONE]\n\n');
      return;
    }
    const usage = script.usage
      ? {
          prompt_tokens: script.usage.prompt,
          completion_tokens: script.usage.completion,
          total_tokens: script.usage.prompt + script.usage.completion,
        }
      : estimateUsage(body, pieces.length);
    res.write(
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [], usage })}\n\n`,
    );
    res.end('data: [DONE]\n\n');
  };

  const server: Server = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (data: string) => {
      raw += data;
    });
    req.on('end', () => void handle(req, res, raw));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const upstream: FakeUpstream = {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    defaultText: DEFAULT_UPSTREAM_TEXT,
    release() {
      for (const go of held.splice(0)) go();
    },
    enqueue: (...replies) => {
      queue.push(...replies);
    },
    lastRequest() {
      const last = requests.at(-1);
      if (!last) throw new Error('the fake upstream received no request');
      return last;
    },
    waitForRequests(count) {
      if (requests.length >= count) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ count, resolve }));
    },
    aborted: () => abortedCount,
    waitForAborted(count) {
      if (abortedCount >= count) return Promise.resolve();
      return new Promise((resolve) => abortWaiters.push({ count, resolve }));
    },
    async close() {
      closing = true;
      for (const res of stalled) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return upstream;
}
