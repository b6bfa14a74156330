import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RawTool {
  name: string;
  description?: string;
  inputSchema: unknown;
}

/**
 * A hand-written streamable-HTTP MCP server (JSON responses, no session) that lists whatever
 * tool definitions it is given, valid or not (the SDK's server would refuse to), split into
 * pages of `pageSize` with `nextCursor`. `gate(n)` is awaited before the n-th `initialize` (from
 * 0) is answered: a server that holds a connecting client as long as a test needs.
 */
export async function startRawMcpServer(options: {
  tools: RawTool[];
  pageSize?: number;
  gate?: (n: number) => Promise<void>;
  /** Every page lists every tool and names a next cursor, forever: the same one, or a new one. */
  endlessPages?: 'same-cursor' | 'new-cursor';
}) {
  let initializes = 0;
  let pages = 0;
  const calls: Array<{ name: string; args: unknown }> = [];
  const server: Server = createServer((req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', async () => {
      const msg = JSON.parse(raw) as { id?: number; method: string; params?: Record<string, unknown> };
      if (msg.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      let result: unknown;
      if (msg.method === 'initialize' && options.gate) await options.gate(initializes++);
      if (msg.method === 'initialize') {
        result = {
          protocolVersion: msg.params?.protocolVersion ?? '2025-06-18',
          capabilities: { tools: {} },
          serverInfo: { name: 'raw', version: '1.0.0' },
        };
      } else if (msg.method === 'tools/list') {
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
        result = { content: [{ type: 'text', text: `called ${String(msg.params?.name)}` }] };
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'no' } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
