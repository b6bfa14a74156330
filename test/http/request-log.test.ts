import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

const logLines: Array<Record<string, unknown>> = [];
const logStream = new Writable({
  write(chunk: Buffer, _encoding, callback) {
    for (const line of chunk.toString('utf8').split('\n')) if (line) logLines.push(JSON.parse(line));
    callback();
  },
});

let t: Awaited<ReturnType<typeof createTestApp>>;
let origin: string;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP, logStream, env: { LOG_LEVEL: 'info' } });
  origin = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => t?.close());

const linesOf = (reqId: string) => logLines.filter((line) => line.reqId === reqId);

describe(`request log (${engineName})`, () => {
  it('writes one line per request once answered: method, path without query, status, time; never the key', async () => {
    const res = await fetch(`${origin}/v1/projects?signature=SECRET-SIGNATURE`, {
      headers: { 'x-service-api-key': KEYS.mainOwner, 'x-request-id': 'one-line' },
    });
    expect(res.status).toBe(200);
    await vi.waitFor(() => expect(linesOf('one-line')).toHaveLength(1), { timeout: 10_000, interval: 20 });
    expect(linesOf('one-line')[0]).toMatchObject({
      level: 30,
      msg: 'request completed',
      req: { method: 'GET', url: '/v1/projects', remoteAddress: '127.0.0.1' },
      res: { statusCode: 200 },
      responseTime: expect.any(Number),
    });
    const text = JSON.stringify(linesOf('one-line'));
    expect(text).not.toContain(KEYS.mainOwner);
    expect(text).not.toContain('SECRET-SIGNATURE');
  });

  it('writes the one line for a refused request too', async () => {
    const res = await fetch(`${origin}/v1/projects`, {
      headers: { 'x-service-api-key': 'atr_ws_not_a_key', 'x-request-id': 'refused-line' },
    });
    expect(res.status).toBe(401);
    await vi.waitFor(
      () => expect(linesOf('refused-line').some((line) => line.msg === 'request completed')).toBe(true),
      { timeout: 10_000, interval: 20 },
    );
    expect(linesOf('refused-line').filter((line) => line.msg === 'request completed')).toEqual([
      expect.objectContaining({
        req: expect.objectContaining({ url: '/v1/projects' }),
        res: { statusCode: 401 },
      }),
    ]);
    expect(JSON.stringify(linesOf('refused-line'))).not.toContain('atr_ws_not_a_key');
  });
});
