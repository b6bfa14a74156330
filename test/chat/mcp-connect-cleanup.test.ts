/**
 * A server that fails or runs out of time while Atrium connects to it leaves nothing open: the
 * client is closed, its session ended (`DELETE`), also one opened by an `initialize` answered
 * after the timeout, and nothing else goes out after the timeout.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { LateAnswerWaits } from '../../src/models/tools/mcp-fetch.js';
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
  await expect.poll(() => server.sessionEnds, { timeout: 5_000 }).toEqual(['raw-1']);
  await sleep(100);
  expect(server.sessionEnds).toEqual(['raw-1']);
}

async function connect(
  server: RawMcpServer,
  options: { lateInitializeMs?: number; lateInitializeWaits?: LateAnswerWaits } = {},
) {
  const connected = await connectMcpTools([{ type: 'mcp', name: 'srv', url: server.url }], {
    connectTimeoutMs: TIMEOUT_MS,
    calls: { timeoutMs: 5_000 },
    ...options,
  });
  await connected.close();
  return connected;
}

// Whatever the late answer is, once it names a session: the session is ended, nothing else is
// sent (no client goes on with it: no notifications/initialized, no tools/list), and its
// connection is closed.
it.each([
  ['a plain answer', undefined],
  ['an answer whose body never ends', 'endless-body'],
  ['an HTTP error', 'http-error'],
  ['an answer too large to read', 'too-large'],
] as const)(
  'ends the session a server opens by answering initialize after the connect timeout (%s), and sends nothing else',
  async (_name, initializeAnswer) => {
    const late = deferred();
    raw = await startRawMcpServer({
      tools: [usable],
      session: true,
      gate: () => late.promise,
      ...(initializeAnswer ? { initializeAnswer } : {}),
    });
    const connected = await connect(raw);
    expect(connected.warnings).toEqual([expect.objectContaining({ code: 'mcp_timeout' })]);
    // The connect is over (the warning given) before the server answers.
    late.resolve();
    await expectSessionEnded(raw);
    expect(raw.requests).toEqual(['initialize', 'DELETE']);
    await expect.poll(() => raw!.openInitializes, { timeout: 5_000 }).toBe(0);
  },
);

it('sends nothing more when initialize is answered after the connect timeout without a session', async () => {
  const late = deferred();
  raw = await startRawMcpServer({ tools: [usable], gate: () => late.promise });
  const connected = await connect(raw);
  expect(connected.warnings).toEqual([expect.objectContaining({ code: 'mcp_timeout' })]);
  late.resolve();
  await expect.poll(() => raw!.openInitializes, { timeout: 5_000 }).toBe(0);
  await sleep(200);
  expect(raw.requests).toEqual(['initialize']);
});

it('closes the connection of an initialize answer whose body is still coming at the connect timeout, and ends its session', async () => {
  raw = await startRawMcpServer({ tools: [usable], session: true, initializeAnswer: 'endless-body' });
  const connected = await connect(raw);
  expect(connected.warnings).toEqual([expect.objectContaining({ code: 'mcp_timeout' })]);
  await expectSessionEnded(raw);
  // At once: an answer that came in time is not waited on in the background.
  await expect.poll(() => raw!.openInitializes, { timeout: 2_000 }).toBe(0);
  expect(raw.requests).toEqual(['initialize', 'DELETE']);
});

it('ends the session named by an initialize answer too large to read', async () => {
  raw = await startRawMcpServer({ tools: [usable], session: true, initializeAnswer: 'too-large' });
  const connected = await connect(raw);
  expect(connected.warnings).toEqual([expect.objectContaining({ code: 'mcp_error' })]);
  await expectSessionEnded(raw);
  expect(raw.requests).toEqual(['initialize', 'DELETE']);
  await expect.poll(() => raw!.openInitializes, { timeout: 2_000 }).toBe(0);
});

it('waits for a late initialize answer no longer than its bound, then closes the connection', async () => {
  // The server never answers (until the test is over).
  raw = await startRawMcpServer({ tools: [usable], session: true, gate: () => release.promise });
  const started = performance.now();
  const connected = await connect(raw, { lateInitializeMs: 2_000 });
  expect(connected.warnings).toEqual([expect.objectContaining({ code: 'mcp_timeout' })]);
  // The connect did not wait for the answer, which is still waited for...
  expect(performance.now() - started).toBeLessThan(TIMEOUT_MS + 1_000);
  expect(raw.openInitializes).toBe(1);
  // ...until the bound.
  await expect.poll(() => raw!.openInitializes, { timeout: 6_000 }).toBe(0);
  release.resolve();
  await sleep(200);
  expect(raw.requests).toEqual(['initialize']);
  expect(raw.sessionEnds).toEqual([]);
});

it('keeps no more late initialize requests open than its waits allow: past them, one is closed at the timeout', async () => {
  // The server never answers (until the test is over): each connect leaves a request behind.
  raw = await startRawMcpServer({ tools: [usable], session: true, gate: () => release.promise });
  const waits = new LateAnswerWaits(1);
  const options = { lateInitializeMs: 3_000, lateInitializeWaits: waits };
  await connect(raw, options);
  expect(raw.openInitializes).toBe(1);
  expect(waits.size).toBe(1);
  // The one wait is taken: the second connect's request is closed when it gives up, as before.
  const second = await connect(raw, options);
  expect(second.warnings).toEqual([expect.objectContaining({ code: 'mcp_timeout' })]);
  await expect.poll(() => raw!.openInitializes, { timeout: 1_000 }).toBe(1);
  // The first is closed at its bound, which frees its wait.
  await expect.poll(() => raw!.openInitializes, { timeout: 6_000 }).toBe(0);
  expect(waits.size).toBe(0);
});

it('counts the DELETE a late initialize answer sends against its waits until that DELETE settles', async () => {
  const late = deferred();
  raw = await startRawMcpServer({
    tools: [usable],
    session: true,
    gate: () => late.promise,
    // The DELETE is never answered (until the test is over).
    hold: (method) => (method === 'DELETE' ? release.promise : undefined),
  });
  const waits = new LateAnswerWaits(1);
  await connect(raw, { lateInitializeMs: 5_000, lateInitializeWaits: waits });
  expect(waits.size).toBe(1);
  late.resolve();
  await expectSessionEnded(raw);
  // The answer came, its connection is closed, but the DELETE it sent is open: before, the
  // wait was given back as the answer came, so the DELETEs of late answers were not bounded.
  await expect.poll(() => raw!.openInitializes, { timeout: 2_000 }).toBe(0);
  expect(waits.size).toBe(1);
  // The DELETE's own time limit (the connect timeout) gives the wait back.
  await expect.poll(() => waits.size, { timeout: TIMEOUT_MS + 2_000 }).toBe(0);
  expect(raw.requests).toEqual(['initialize', 'DELETE']);
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
