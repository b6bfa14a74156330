/**
 * A server that fails or runs out of time while Atrium connects to it leaves nothing open: the
 * client is closed, its session ended (`DELETE`), and no request goes out after the timeout.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { connectMcpTools } from '../../src/models/tools/mcp.js';
import { deferred } from '../helpers/deferred.js';
import { startRawMcpServer } from './raw-mcp-server.js';

type RawMcpServer = Awaited<ReturnType<typeof startRawMcpServer>>;
// Long enough for the steps a test does not hold back on a loaded CI machine: the timeout must
// fall on the step held, after the server opened its session.
const TIMEOUT_MS = 4_000;
const usable = { name: 'lookup', inputSchema: { type: 'object', properties: {} } };
let raw: RawMcpServer | undefined;
/** Holds what a test's server holds back until the test is over. */
let release = deferred();
beforeEach(() => {
  release = deferred();
});
afterEach(async () => {
  release.resolve();
  await raw?.close();
  raw = undefined;
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The server's one session was ended, once. */
async function expectSessionEnded(server: RawMcpServer) {
  await expect.poll(() => server.sessionEnds).toEqual(['raw-1']);
  await sleep(100);
  expect(server.sessionEnds).toEqual(['raw-1']);
}

async function connect(server: RawMcpServer) {
  const connected = await connectMcpTools([{ type: 'mcp', name: 'srv', url: server.url }], {
    connectTimeoutMs: TIMEOUT_MS,
    calls: { timeoutMs: 5_000 },
  });
  await connected.close();
  return connected;
}

it('sends nothing more when initialize is answered after the connect timeout', async () => {
  const late = deferred();
  raw = await startRawMcpServer({ tools: [usable], session: true, gate: () => late.promise });
  const connected = await connect(raw);
  expect(connected.warnings).toEqual([expect.objectContaining({ code: 'mcp_timeout' })]);
  late.resolve();
  await sleep(500);
  // The client that connected late would list the server's tools.
  expect(raw.requests).toEqual(['initialize']);
});

it('ends the session of a server that answered initialize, then ran out of time', async () => {
  raw = await startRawMcpServer({
    tools: [usable],
    session: true,
    hold: (method) => (method === 'notifications/initialized' ? release.promise : undefined),
  });
  const connected = await connect(raw);
  expect(connected.warnings).toEqual([expect.objectContaining({ code: 'mcp_timeout' })]);
  await expectSessionEnded(raw);
});

it('ends the session of a server whose tool listing runs out of time', async () => {
  raw = await startRawMcpServer({
    tools: [usable],
    session: true,
    hold: (method) => (method === 'tools/list' ? release.promise : undefined),
  });
  const connected = await connect(raw);
  expect(connected.warnings).toEqual([expect.objectContaining({ code: 'mcp_timeout' })]);
  await expectSessionEnded(raw);
});

it('ends the session of a server whose tool listing fails', async () => {
  raw = await startRawMcpServer({ tools: [usable], session: true, failList: true });
  const connected = await connect(raw);
  expect(connected.warnings).toEqual([expect.objectContaining({ code: 'mcp_error' })]);
  await expectSessionEnded(raw);
});
