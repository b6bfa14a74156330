import { lookup } from 'node:dns/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publicOnlyFetch, publicOnlyLookup } from '../../src/models/tools/mcp-address.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatSetup, userText } from './fixtures.js';
import { startMcpServer, type TestMcpServer } from './mcp-server.js';

/**
 * An agent made over the API is a tenant's: its MCP servers must be public, or a workspace admin
 * could make Atrium call the operator's internal services (SSRF) and read their errors back in
 * `warnings`. Setup-file agents (the operator's) reach any server (test/chat/chat-tools.test.ts).
 */
let upstream: FakeUpstream;
let mcp: TestMcpServer;
/** A plain HTTP server that counts what reaches it: an "internal service". */
let internal: Server;
let internalHits = 0;
let internalUrl: string;
const resolvedHost = await lookup(hostname()).catch(() => undefined);
const hostResolvesPrivate =
  resolvedHost !== undefined &&
  /^(127\.|10\.|192\.168\.|172\.(1[6-9]|2\d|3[01])\.|::1$)/.test(resolvedHost.address);

beforeAll(async () => {
  upstream = await startFakeUpstream();
  mcp = await startMcpServer('ok');
  internal = createServer((_req, res) => {
    internalHits++;
    res.writeHead(500).end('INTERNAL_ONLY_SECRET=hunter2');
  });
  await new Promise<void>((resolve) => internal.listen(0, '127.0.0.1', resolve));
  internalUrl = `http://127.0.0.1:${(internal.address() as AddressInfo).port}/admin`;
});
afterAll(async () => {
  await Promise.all([upstream.close(), mcp.close(), new Promise((resolve) => internal.close(resolve))]);
});

function createAgent(t: TestApp, url: string) {
  return t.app.inject({
    method: 'POST',
    url: '/v1/workspace/wsp_main/agents',
    headers: { 'x-service-api-key': CHAT_KEYS.mainAdmin },
    payload: { title: `Agent ${Math.random()}`, tools: [{ type: 'mcp', name: 'internal', url }] },
  });
}

function chat(t: TestApp, agentId: string) {
  return t.app.inject({
    method: 'POST',
    url: '/v1/chat',
    headers: { 'x-service-api-key': CHAT_KEYS.main },
    payload: { agentId, messages: [userText('hi')] },
  });
}

describe('MCP servers of agents made over the API (default: public only)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ setup: chatSetup(upstream), mcpConnectTimeoutMs: 2_000 });
  });
  afterAll(() => t.close());

  it('refuses a private, loopback or link-local MCP URL with 400 naming the tool', async () => {
    for (const url of [
      internalUrl,
      'http://localhost:8080/mcp',
      'http://169.254.169.254/latest/meta-data/',
      'http://10.1.2.3/mcp',
      'http://[::1]:9/mcp',
      'http://[::ffff:127.0.0.1]/mcp',
      'http://metadata.internal/mcp',
    ]) {
      const res = await createAgent(t, url);
      expect(res.statusCode, url).toBe(400);
      expect(res.json().details.issues[0].path).toBe('body.tools.0.url');
      expect(res.json().message).toContain('ATRIUM_MCP_ALLOW_PRIVATE_NETWORK');
    }
    const created = await createAgent(t, 'https://mcp.example.test/');
    expect(created.statusCode).toBe(201);
    const patched = await t.app.inject({
      method: 'PATCH',
      url: `/v1/agents/${created.json().data.agent.id}`,
      headers: { 'x-service-api-key': CHAT_KEYS.mainAdmin },
      payload: { tools: [{ type: 'mcp', name: 'internal', url: internalUrl }] },
    });
    expect(patched.statusCode).toBe(400);
  });

  it('never connects to one stored before (a warning instead; the internal service sees nothing)', async () => {
    const created = await createAgent(t, 'https://mcp.example.test/');
    const agentId = created.json().data.agent.id as string;
    await t.db
      .updateTable('agents')
      .set({ tools: JSON.stringify([{ type: 'mcp', name: 'internal', url: internalUrl }]) })
      .where('id', '=', agentId)
      .execute();
    const before = internalHits;
    const res = await chat(t, agentId);
    expect(res.statusCode).toBe(200);
    expect(res.json().warnings).toEqual([
      {
        tool: 'internal',
        code: 'mcp_not_allowed',
        message: expect.stringContaining('ATRIUM_MCP_ALLOW_PRIVATE_NETWORK'),
      },
    ]);
    // Before: a GET and a POST reached it, and its error text came back in the warning.
    expect(internalHits).toBe(before);
    expect(res.body).not.toContain('hunter2');
  });

  // Meaningful only where the host name resolves to a private address (skipped, not passed, elsewhere).
  it.skipIf(!hostResolvesPrivate)(
    'refuses a name that resolves to a private address when connecting (this machine’s host name)',
    async () => {
      const name = hostname();
      const before = internalHits;
      const port = (internal.address() as AddressInfo).port;
      const error = await publicOnlyFetch(`http://${name}:${port}/admin`).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Error);
      const codes: unknown[] = [];
      for (let cause: unknown = error; cause; cause = (cause as { cause?: unknown }).cause) {
        codes.push((cause as { code?: unknown }).code);
      }
      expect(codes).toContain('EADDRNOTPUBLIC');
      expect(internalHits).toBe(before);
    },
  );
});

describe('the public-only DNS lookup', () => {
  const fake =
    (...addresses: Array<[string, number]>) =>
    (_host: string, _options: object, callback: (error: null, found: unknown) => void) =>
      callback(
        null,
        addresses.map(([address, family]) => ({ address, family })),
      );
  const run = (lookup: ReturnType<typeof fake>, all = false) =>
    new Promise<{ error: NodeJS.ErrnoException | null; found: unknown }>((resolve) =>
      publicOnlyLookup(lookup as never)('mcp.example.test', { all }, (error, found) =>
        resolve({ error, found }),
      ),
    );

  it('passes public addresses on and refuses a name with any address that is not public', async () => {
    expect((await run(fake(['93.184.216.34', 4]))).found).toBe('93.184.216.34');
    expect((await run(fake(['2606:2800:220:1::', 6]), true)).found).toEqual([
      { address: '2606:2800:220:1::', family: 6 },
    ]);
    for (const address of [
      ['10.0.0.7', 4],
      ['127.0.0.1', 4],
      ['169.254.169.254', 4],
      ['100.64.0.1', 4],
      ['::1', 6],
      ['fe80::1', 6],
      ['::ffff:192.168.0.1', 6],
    ] as Array<[string, number]>) {
      const { error } = await run(fake(['93.184.216.34', 4], address));
      expect(error?.code, address[0]).toBe('EADDRNOTPUBLIC');
    }
  });
});

describe('MCP servers of agents made over the API, with ATRIUM_MCP_ALLOW_PRIVATE_NETWORK=true', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({
      setup: chatSetup(upstream),
      mcpConnectTimeoutMs: 2_000,
      env: { ATRIUM_MCP_ALLOW_PRIVATE_NETWORK: 'true' },
    });
  });
  afterAll(() => t.close());

  it('accepts and connects to a loopback MCP server', async () => {
    const created = await createAgent(t, mcp.url);
    expect(created.statusCode).toBe(201);
    const res = await chat(t, created.json().data.agent.id);
    expect(res.statusCode).toBe(200);
    expect(res.json().warnings ?? []).toEqual([]);
    expect(JSON.stringify(upstream.lastRequest().body.tools)).toContain('internal_lookup');
  });
});
