import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import { chatSetup } from '../chat/fixtures.js';
import { startMcpServer, type TestMcpServer } from '../chat/mcp-server.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';

export interface OpenAIApp {
  upstream: FakeUpstream;
  /** The MCP server of `agt_tools` (tool `live`). */
  mcp: TestMcpServer;
  t: TestApp;
  /** `http://127.0.0.1:PORT/v1/openai`, what the `openai` SDK takes as `baseURL`. */
  baseURL: string;
}

/**
 * The chat fixtures' app listening on a free port, with a fake upstream and an MCP server for
 * `agt_tools` (`mcpMode` as startMcpServer's), started before a test file's tests (handed to
 * `started`) and closed after them.
 */
export function useOpenAIApp(
  options: { mcpMode?: 'ok' | 'stall'; mcpConnectTimeoutMs?: number },
  started: (app: OpenAIApp) => void,
): void {
  let app: OpenAIApp | undefined;
  beforeAll(async () => {
    const upstream = await startFakeUpstream();
    const mcp = await startMcpServer(options.mcpMode ?? 'ok');
    const t = await createTestApp({
      setup: chatSetup(upstream),
      mcpConnectTimeoutMs: options.mcpConnectTimeoutMs,
    });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const baseURL = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/v1/openai`;
    await t.db
      .updateTable('agents')
      .set({ tools: JSON.stringify([{ type: 'mcp', name: 'live', url: mcp.url }]) })
      .where('id', '=', 'agt_tools')
      .execute();
    app = { upstream, mcp, t, baseURL };
    started(app);
  });
  afterAll(async () => {
    if (!app) return;
    await app.t.close();
    await Promise.all([app.upstream.close(), app.mcp.close()]);
  });
}
