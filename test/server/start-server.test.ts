import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer } from '../../src/server.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

let env: TestEnv;
let server: Awaited<ReturnType<typeof startServer>>;
beforeAll(async () => {
  env = await createTestEnv({ HOST: '127.0.0.1', PORT: '0' });
  await applyFixture(env, TENANCY_SETUP);
  server = await startServer(env.config);
});
afterAll(async () => {
  await server?.close();
  await env.close();
});

describe(`startServer (${engineName})`, () => {
  it('with PORT=0, signs URLs for the port it really listens on, and they work', async () => {
    expect(server.address).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(server.address).not.toMatch(/:0$/);
    const res = await fetch(`${server.address}/v1/projects/prj_docs/files/upload`, {
      method: 'POST',
      headers: { 'x-service-api-key': KEYS.mainOwner, 'content-type': 'application/json' },
      body: JSON.stringify({ filename: 'port.txt', contentType: 'text/plain', sizeBytes: 2 }),
    });
    expect(res.status).toBe(200);
    const { uploadUrl } = (await res.json()).data as { uploadUrl: string };
    expect(new URL(uploadUrl).origin).toBe(server.address);
    const put = await fetch(uploadUrl, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain' },
      body: 'ok',
    });
    expect(put.status).toBe(200);
  });
});
