import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RawTool {
  name: string;
  description?: string;
  inputSchema: unknown;
}

/** Writes `body` no faster than the client reads it: a client that stops reading stops it. */
async function writeAsRead(res: ServerResponse, body: Buffer): Promise<void> {
  const piece = 64 * 1024;
  for (let at = 0; at < body.length && !res.destroyed; at += piece) {
    if (res.write(body.subarray(at, at + piece))) continue;
    await new Promise<void>((resolve) => {
      res.once('drain', resolve);
      res.once('close', resolve);
    });
  }
  res.end();
}

/**
 * A hand-written streamable-HTTP MCP server (JSON responses, no session unless `session`) that
 * lists whatever tool definitions it is given, valid or not (the SDK's server would refuse to),
 * split into pages of `pageSize` (or as `pages` says) with `nextCursor`. `gate(n)` is awaited
 * before the n-th `initialize` (from 0) is answered: a server that holds a connecting client as
 * long as a test needs; `hold(method)` holds the answer to any message alike (`DELETE` too).
 * `requests` lists what it was sent (JSON-RPC methods, and `DELETE`), `sessionEnds` the sessions
 * ended by a `DELETE`.
 * `callResult` is what `tools/call` answers; `answerAs` how every answer is sent; `stallCall` a
 * call that is never answered whole. `openCalls` counts the calls whose connection is still open,
 * `openInitializes` the `initialize` requests alike, `openLists` the `tools/list` ones; `initializeAnswer` an `initialize` answered
 * otherwise than with its result.
 */
export async function startRawMcpServer(options: {
  tools: RawTool[];
  pageSize?: number;
  /** The pages `tools/list` answers, in order (`tools` unused): any page, empty ones too. */
  pages?: unknown[][];
  /** Each `initialize` answer opens a session (`mcp-session-id: raw-<n>`), ended by a `DELETE`. */
  session?: boolean;
  /** Awaited before a message of this JSON-RPC method (or a `DELETE`) is answered (after `gate`). */
  hold?: (method: string) => Promise<void> | undefined;
  /** `tools/list` answers a JSON-RPC error. */
  failList?: boolean;
  gate?: (n: number) => Promise<void>;
  /** Every page lists every tool and names a next cursor, forever: the same one, or a new one. */
  endlessPages?: 'same-cursor' | 'new-cursor';
  /** The result of a `tools/call` (default: a text item `called <name>`), or a promise of it. */
  callResult?: (name: string, args: unknown) => unknown;
  /**
   * A call of this tool is taken and never answered (`no-answer`), or its answer stops after its
   * first half (`mid-answer`); the connection stays open until the client closes it.
   */
  stallCall?: (name: string) => 'no-answer' | 'mid-answer' | undefined;
  /** One JSON body with its length (default), a JSON body of unknown length, or an event stream. */
  answerAs?: 'json' | 'chunked-json' | 'event-stream';
  /**
   * `initialize` is answered HTTP 500 (`http-error`), with its headers and half its body and then
   * nothing more (`endless-body`), or with a `content-length` past MAX_MCP_RESPONSE_BYTES and a
   * little of that body (`too-large`); with `session`, any of them opens a session all the same.
   */
  initializeAnswer?: 'http-error' | 'endless-body' | 'too-large';
}) {
  let initializes = 0;
  let pages = 0;
  const calls: Array<{ name: string; args: unknown }> = [];
  /** Answers whose connection the client closed before it had read them whole. */
  let answersCutShort = 0;
  let openCalls = 0;
  let openInitializes = 0;
  let openLists = 0;
  const requests: string[] = [];
  const sessionEnds: string[] = [];
  let sessions = 0;
  const server: Server = createServer(async (req, res) => {
    if (req.method === 'DELETE' && options.session) {
      requests.push('DELETE');
      sessionEnds.push(String(req.headers['mcp-session-id']));
      await options.hold?.('DELETE');
      res.writeHead(200).end();
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', async () => {
      const msg = JSON.parse(raw) as { id?: number; method: string; params?: Record<string, unknown> };
      requests.push(msg.method);
      if (msg.id === undefined) {
        await options.hold?.(msg.method);
        res.writeHead(202).end();
        return;
      }
      let result: unknown;
      let stall: 'no-answer' | 'mid-answer' | undefined;
      if (msg.method === 'initialize') {
        openInitializes++;
        res.once('close', () => openInitializes--);
      }
      if (msg.method === 'tools/list') {
        openLists++;
        res.once('close', () => openLists--);
      }
      if (msg.method === 'initialize' && options.gate) await options.gate(initializes++);
      await options.hold?.(msg.method);
      if (msg.method === 'initialize' && options.initializeAnswer === 'http-error') {
        res.writeHead(500, options.session ? { 'mcp-session-id': `raw-${++sessions}` } : {});
        res.end('overloaded');
        return;
      }
      if (msg.method === 'initialize' && options.initializeAnswer === 'too-large') {
        res.writeHead(200, {
          ...(options.session ? { 'mcp-session-id': `raw-${++sessions}` } : {}),
          'content-type': 'application/json',
          'content-length': 5 * 1024 * 1024,
        });
        res.write('{"jsonrpc":"2.0","id":');
        return;
      }
      if (msg.method === 'initialize') {
        if (options.initializeAnswer === 'endless-body') stall = 'mid-answer';
        result = {
          protocolVersion: msg.params?.protocolVersion ?? '2025-06-18',
          capabilities: { tools: {} },
          serverInfo: { name: 'raw', version: '1.0.0' },
        };
      } else if (msg.method === 'tools/list' && options.pages) {
        const page = Number(msg.params?.cursor ?? 0);
        result = {
          tools: options.pages[page] ?? [],
          ...(page + 1 < options.pages.length ? { nextCursor: String(page + 1) } : {}),
        };
      } else if (msg.method === 'tools/list' && !options.failList) {
        const start = options.endlessPages ? 0 : Number(msg.params?.cursor ?? 0);
        const end = start + (options.pageSize ?? options.tools.length);
        result = {
          tools: options.tools.slice(start, end),
          ...(options.endlessPages
            ? { nextCursor: options.endlessPages === 'same-cursor' ? 'again' : `page-${++pages}` }
            : end < options.tools.length
              ? { nextCursor: String(end) }
              : {}),
        };
      } else if (msg.method === 'tools/call') {
        calls.push({ name: String(msg.params?.name), args: msg.params?.arguments });
        openCalls++;
        res.once('close', () => openCalls--);
        stall = options.stallCall?.(String(msg.params?.name));
        if (stall === 'no-answer') return;
        result = options.callResult
          ? await options.callResult(String(msg.params?.name), msg.params?.arguments)
          : { content: [{ type: 'text', text: `called ${String(msg.params?.name)}` }] };
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'no' } }));
        return;
      }
      const answer = JSON.stringify({ jsonrpc: '2.0', id: msg.id, result });
      const body = Buffer.from(
        options.answerAs === 'event-stream' ? `event: message\ndata: ${answer}\n\n` : answer,
      );
      res.on('close', () => {
        if (!res.writableFinished) answersCutShort++;
      });
      res.writeHead(200, {
        ...(options.session && msg.method === 'initialize' ? { 'mcp-session-id': `raw-${++sessions}` } : {}),
        'content-type': options.answerAs === 'event-stream' ? 'text/event-stream' : 'application/json',
        ...(options.answerAs === undefined || options.answerAs === 'json'
          ? { 'content-length': body.length }
          : {}),
      });
      if (stall === 'mid-answer') {
        res.write(body.subarray(0, body.length >> 1));
        return;
      }
      await writeAsRead(res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls,
    requests,
    sessionEnds,
    get answersCutShort() {
      return answersCutShort;
    },
    get openCalls() {
      return openCalls;
    },
    get openInitializes() {
      return openInitializes;
    },
    get openLists() {
      return openLists;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
