import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the fake Anthropic server was sent, one entry per request. */
export interface AnthropicRequest {
  path: string;
  headers: IncomingMessage['headers'];
  body: {
    model?: string;
    system?: Array<{ type: string; text: string }> | string;
    messages?: Array<{ role: string; content: Array<{ type: string; text?: string }> | string }>;
    temperature?: number;
    max_tokens?: number;
    stream?: boolean;
    [key: string]: unknown;
  };
}

export type AnthropicReply =
  | { kind: 'text'; text: string; usage: { input: number; output: number } }
  /** Answers the HTTP status with an Anthropic error body. */
  | { kind: 'fail'; status: number; message: string }
  /** Streams `afterPieces` pieces, then an `event: error` (what Anthropic sends when overloaded). */
  | { kind: 'error-event'; text: string; afterPieces: number }
  /** Streams `afterPieces` pieces, then destroys the connection. */
  | { kind: 'disconnect'; text: string; afterPieces: number };

export interface FakeAnthropic {
  /** `http://127.0.0.1:PORT/v1`, the baseURL an `anthropic` provider points at. */
  baseURL: string;
  requests: AnthropicRequest[];
  enqueue(...replies: AnthropicReply[]): void;
  lastRequest(): AnthropicRequest;
  close(): Promise<void>;
}

const pieces = (text: string) => text.match(/\S+\s*|\s+/g) ?? [];
const event = (type: string, data: Record<string, unknown>) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

/**
 * A real HTTP server on 127.0.0.1 speaking the Anthropic Messages API (`POST /v1/messages`,
 * JSON or SSE), so the `anthropic` provider path runs over the wire as it does in production.
 */
export async function startFakeAnthropic(): Promise<FakeAnthropic> {
  const requests: AnthropicRequest[] = [];
  const queue: AnthropicReply[] = [];
  let counter = 0;

  const answer = (req: IncomingMessage, res: ServerResponse, raw: string) => {
    const body = JSON.parse(raw || '{}') as AnthropicRequest['body'];
    requests.push({ path: req.url ?? '', headers: req.headers, body });
    if (req.method !== 'POST' || req.url !== '/v1/messages') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: 'not found' } }));
      return;
    }
    const reply = queue.shift() ?? {
      kind: 'text',
      text: 'Hello from the fake Claude.',
      usage: { input: 9, output: 6 },
    };
    const id = `msg_${++counter}`;
    const model = body.model ?? 'claude-fake';
    if (reply.kind === 'fail') {
      res.writeHead(reply.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'error', error: { type: 'api_error', message: reply.message } }));
      return;
    }
    const usage = reply.kind === 'text' ? reply.usage : { input: 5, output: 5 };
    if (!body.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id,
          type: 'message',
          role: 'assistant',
          model,
          content: [{ type: 'text', text: reply.text }],
          stop_reason: 'end_turn',
          stop_sequence: null,
          usage: { input_tokens: usage.input, output_tokens: usage.output },
        }),
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(
      event('message_start', {
        message: {
          id,
          type: 'message',
          role: 'assistant',
          model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: usage.input, output_tokens: 1 },
        },
      }),
    );
    res.write(event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }));
    const all = pieces(reply.text);
    const sent = reply.kind === 'text' ? all : all.slice(0, reply.afterPieces);
    for (const piece of sent) {
      res.write(event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: piece } }));
    }
    if (reply.kind === 'disconnect') {
      // Let the pieces leave before the connection dies mid-stream.
      setImmediate(() => req.socket.destroy());
      return;
    }
    if (reply.kind === 'error-event') {
      res.end(event('error', { error: { type: 'overloaded_error', message: 'Overloaded' } }));
      return;
    }
    res.write(event('content_block_stop', { index: 0 }));
    res.write(
      event('message_delta', {
        delta: { stop_reason: 'end_turn', stop_sequence: null },
        usage: { output_tokens: usage.output },
      }),
    );
    res.end(event('message_stop', {}));
  };

  const server = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (raw += chunk));
    req.on('end', () => answer(req, res, raw));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    enqueue: (...replies) => queue.push(...replies),
    lastRequest() {
      const last = requests.at(-1);
      if (!last) throw new Error('the fake Anthropic server received no request');
      return last;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
