import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export interface TestMcpServer {
  url: string;
  /** Inputs the `lookup` tool was called with. */
  calls: Array<{ term: string }>;
  /** The Authorization header of each request taken (undefined when none was sent). */
  authorizations: Array<string | undefined>;
  /** Requests taken and never answered (`stall`, and the held `DELETE`s). */
  readonly stalledRequests: number;
  close(): Promise<void>;
}

/**
 * A real streamable-HTTP MCP server (stateless) with one tool, `lookup`. `mode: 'fail'` answers
 * every request with HTTP 500; `mode: 'stall'` accepts requests and never answers;
 * `mode: 'sessions-hold-close'` gives each client a session and never answers the `DELETE`
 * that ends it.
 */
export async function startMcpServer(
  mode: 'ok' | 'fail' | 'stall' | 'sessions-hold-close' = 'ok',
): Promise<TestMcpServer & { sessionEnds: number }> {
  const calls: Array<{ term: string }> = [];
  const authorizations: Array<string | undefined> = [];
  const stalled: ServerResponse[] = [];
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  let sessionEnds = 0;
  const server: Server = createServer(async (req, res) => {
    authorizations.push(req.headers.authorization);
    if (mode === 'fail') {
      res.writeHead(500).end('broken');
      return;
    }
    if (mode === 'stall' || (mode === 'sessions-hold-close' && req.method === 'DELETE')) {
      if (req.method === 'DELETE') sessionEnds++;
      stalled.push(res);
      return;
    }
    const sessionId = req.headers['mcp-session-id'];
    const session = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
    if (session) {
      await session.handleRequest(req, res);
      return;
    }
    const mcp = new McpServer({ name: 'test-mcp', version: '1.0.0' });
    mcp.registerTool(
      'lookup',
      { description: 'Looks a term up', inputSchema: { term: z.string() } },
      async ({ term }) => {
        calls.push({ term });
        return { content: [{ type: 'text', text: `definition of ${term}` }] };
      },
    );
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: mode === 'sessions-hold-close' ? () => `session-${sessions.size + 1}` : undefined,
      onsessioninitialized: (id) => void sessions.set(id, transport),
      enableJsonResponse: true,
    });
    if (mode !== 'sessions-hold-close') {
      res.on('close', () => {
        void transport.close();
        void mcp.close();
      });
    }
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls,
    authorizations,
    get sessionEnds() {
      return sessionEnds;
    },
    get stalledRequests() {
      return stalled.length;
    },
    async close() {
      for (const res of stalled) res.destroy();
      for (const transport of sessions.values()) await transport.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
