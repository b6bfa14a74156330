import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createObjectStore } from '../../src/storage/index.js';
import { createTestApp } from '../helpers/app.js';
import { captureLog, type LogLine } from '../helpers/log-capture.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { CHAT_KEYS, userText } from '../chat/fixtures.js';
import { listeningChatApp } from '../chat/listening-app.js';
import { EventReader, textDeltas } from '../chat/sse-reader.js';

const WARN = 40;

/**
 * The service refusing work as designed (full, or shutting down) is not a server fault: README,
 * "Logs", keeps `error` (with a stack) for those. Before: both refusals were logged at `error`
 * with the ApiError's stack, and every `/readyz` probe of a draining process at `warn` with one.
 */
describe('log levels of refusals and of readiness while draining', () => {
  const log = captureLog();
  let app: Awaited<ReturnType<typeof listeningChatApp>>;
  beforeAll(async () => {
    app = await listeningChatApp({
      env: { ATRIUM_MAX_CONCURRENT_REPLIES: '1', LOG_LEVEL: 'info' },
      shutdownWaitMs: 3_000,
      logStream: log.stream,
    });
  });
  afterAll(() => app.close());

  const send = (requestId: string) =>
    fetch(`${app.baseUrl}/v1/chat`, {
      method: 'POST',
      headers: { ...app.headers, 'x-request-id': requestId },
      body: JSON.stringify({ agentId: 'agt_plain', messages: [userText(requestId)] }),
    });
  const failureLines = (requestId: string) =>
    log.lines.filter((line) => line.reqId === requestId && line.msg !== 'request completed');

  it('logs a full process at warn and a shutting-down one at info, without a stack; readyz probes of the drain not at warn', async () => {
    app.upstream.enqueue({ kind: 'held', text: 'one two three four', afterPieces: 2 });
    const first = await app.post({ agentId: 'agt_plain', stream: true, messages: [userText('first')] });
    const chatId = first.headers.get('x-chat-id')!;
    const events = new EventReader(first);
    await events.until(textDeltas(2));

    const busy = await send('refused-busy');
    expect(busy.status).toBe(503);
    await busy.body?.cancel();

    const closing = app.t.app.close();
    const ready = await vi.waitFor(
      async () => {
        const res = await fetch(`${app.baseUrl}/readyz`, { headers: { 'x-request-id': 'probe-draining' } });
        if (res.status === 503) return res;
        await res.body?.cancel();
        throw new Error(`readyz answered ${res.status}, not yet draining`);
      },
      { timeout: 10_000, interval: 20 },
    );
    expect((await ready.json()).checks.shutdown).toBe('unavailable');
    const draining = await send('refused-draining');
    expect(draining.status).toBe(503);
    await draining.body?.cancel();
    await fetch(`${app.baseUrl}/v1/chat/${chatId}/stop`, {
      method: 'POST',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    }).then((res) => res.body?.cancel());
    await closing;
    await events.all();

    const shape = (lines: LogLine[]) =>
      lines.map((line) => ({ level: line.level, msg: line.msg, code: line.code, hasErr: 'err' in line }));
    expect({
      busy: shape(failureLines('refused-busy')),
      draining: shape(failureLines('refused-draining')),
      probe: failureLines('probe-draining').filter((line) => line.level >= WARN),
    }).toEqual({
      busy: [
        {
          level: WARN,
          msg: 'Too many replies are being generated right now; try again shortly',
          code: 'service_unavailable',
          hasErr: false,
        },
      ],
      draining: [
        {
          level: 30,
          msg: 'This server is shutting down; send the request again',
          code: 'service_unavailable',
          hasErr: false,
        },
      ],
      probe: [],
    });
  }, 30_000);
});

describe('readiness when storage fails', () => {
  const log = captureLog();
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp({
      setup: TENANCY_SETUP,
      env: { LOG_LEVEL: 'info' },
      logStream: log.stream,
      store: (config) => {
        const store = createObjectStore(config);
        store.check = async () => {
          throw new Error('storage is down');
        };
        return store;
      },
    });
  });
  afterAll(() => t.close());

  it('still logs the failing check at warn with its error', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/readyz',
      headers: { 'x-request-id': 'probe-storage' },
    });
    expect([res.statusCode, res.json().checks.storage]).toEqual([503, 'unavailable']);
    const lines = log.lines.filter((line) => line.reqId === 'probe-storage' && line.level >= WARN);
    expect(lines).toEqual([
      expect.objectContaining({ level: WARN, msg: 'storage not ready', err: expect.anything() }),
    ]);
  });
});

describe('log level of a JSON reply cut short by the shutdown', () => {
  const log = captureLog();
  let app: Awaited<ReturnType<typeof listeningChatApp>>;
  beforeAll(async () => {
    app = await listeningChatApp({ env: { LOG_LEVEL: 'info' }, shutdownWaitMs: 100, logStream: log.stream });
  });
  afterAll(() => app.close());

  it('logs it at warn without a stack: the drain working as designed, not a fault', async () => {
    app.upstream.enqueue({ kind: 'held', text: 'one two three four', afterPieces: 2 });
    const reply = fetch(`${app.baseUrl}/v1/chat`, {
      method: 'POST',
      headers: { ...app.headers, 'x-request-id': 'cut-by-shutdown' },
      body: JSON.stringify({ agentId: 'agt_plain', messages: [userText('hello')] }),
    });
    await vi.waitFor(() => expect(app.upstream.requests.length).toBeGreaterThan(0), { timeout: 10_000 });
    const closing = app.t.app.close();
    const res = await reply;
    expect(res.status).toBe(503);
    await res.body?.cancel();
    await closing;
    const lines = log.lines.filter(
      (line) => line.reqId === 'cut-by-shutdown' && line.msg !== 'request completed',
    );
    expect(lines.map((line) => ({ level: line.level, msg: line.msg, hasErr: 'err' in line }))).toEqual([
      { level: WARN, msg: 'The server shut down while this reply was being generated', hasErr: false },
    ]);
  }, 30_000);
});
