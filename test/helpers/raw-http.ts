import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** What a raw connection received before it closed, parsed enough to assert on. */
export interface RawResponse {
  status: number | undefined;
  headers: Record<string, string>;
  body: string;
  /** Everything received, as text. */
  text: string;
}

export function parseRawResponse(text: string): RawResponse {
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return { status: undefined, headers: {}, body: '', text };
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine?.split(' ')[1]), headers, body: text.slice(end + 4), text };
}

/**
 * A client on a plain TCP socket, for what fetch cannot send: malformed requests, headers or
 * bodies that arrive a few bytes at a time.
 */
export class RawClient {
  readonly socket: Socket;
  private readonly chunks: Buffer[] = [];
  /** Resolves with everything received once the server has closed the connection. */
  readonly closed: Promise<RawResponse>;
  bytesSent = 0;
  private readonly allowHalfOpen: boolean;

  /**
   * With `allowHalfOpen`, the client goes on sending after the server has ended its side (as a
   * client that writes its whole body before reading does); otherwise it stops, as Node's does.
   */
  constructor(port: number, options: { allowHalfOpen?: boolean } = {}) {
    this.allowHalfOpen = options.allowHalfOpen ?? false;
    this.socket = connect({ port, host: '127.0.0.1', allowHalfOpen: this.allowHalfOpen });
    this.socket.on('data', (chunk) => this.chunks.push(chunk));
    this.closed = new Promise((resolve) => {
      // A reset after the answer is still an answer: the bytes read so far are what counts.
      this.socket.on('error', () => {});
      this.socket.on('close', () => resolve(parseRawResponse(Buffer.concat(this.chunks).toString('utf8'))));
    });
  }

  get isClosed(): boolean {
    return this.socket.destroyed || (this.allowHalfOpen ? !this.socket.writable : this.socket.readableEnded);
  }

  send(data: string | Buffer): void {
    if (this.isClosed) return;
    this.socket.write(data);
    this.bytesSent += Buffer.byteLength(data);
  }

  /**
   * Sends `data` `chunkBytes` at a time with `intervalMs` between chunks, until all is sent or
   * the server closes the connection. Resolves with the number of bytes sent.
   */
  async trickle(data: string | Buffer, chunkBytes: number, intervalMs: number): Promise<number> {
    const bytes = Buffer.from(data);
    let sent = 0;
    while (sent < bytes.length && !this.isClosed) {
      this.send(bytes.subarray(sent, sent + chunkBytes));
      sent += Math.min(chunkBytes, bytes.length - sent);
      await Promise.race([sleep(intervalMs), this.closed]);
    }
    return sent;
  }

  /** Everything received so far. */
  received(): RawResponse {
    return parseRawResponse(Buffer.concat(this.chunks).toString('utf8'));
  }

  close(): void {
    this.socket.destroy();
  }
}

/** Sends one request whole and resolves with what came back once the server closed. */
export async function rawExchange(port: number, request: string | Buffer): Promise<RawResponse> {
  const client = new RawClient(port);
  client.send(request);
  // Keep-alive would leave the connection open: end our side once the answer is in.
  const timer = setInterval(() => {
    const { status, headers, body } = client.received();
    const complete = Buffer.byteLength(body) >= Number(headers['content-length'] ?? 0);
    if (status !== undefined && complete) client.socket.end();
  }, 20);
  try {
    return await client.closed;
  } finally {
    clearInterval(timer);
  }
}
