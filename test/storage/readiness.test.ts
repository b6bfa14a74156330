import { afterEach, describe, expect, it } from 'vitest';
import { createObjectStore } from '../../src/storage/index.js';
import { createTestApp, engineName } from '../helpers/app.js';

let t: Awaited<ReturnType<typeof createTestApp>> | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

describe(`storage readiness (${engineName})`, () => {
  it('reports storage ok in /readyz when the store answers', async () => {
    t = await createTestApp();
    const res = await t.app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(200);
    expect(res.json().checks).toMatchObject({ database: 'ok', storage: 'ok' });
  });

  it('answers 503 with storage unavailable when the store does not answer', async () => {
    t = await createTestApp({
      store: (config) => {
        const store = createObjectStore(config);
        store.check = () => Promise.reject(new Error('disk gone'));
        return store;
      },
    });
    const res = await t.app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(503);
    expect(res.json().checks).toMatchObject({ database: 'ok', storage: 'unavailable' });
  });
});
