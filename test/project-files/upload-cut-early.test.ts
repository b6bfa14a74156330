import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { deferred } from '../helpers/deferred.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { createObjectStore, type ObjectStore } from '../../src/storage/index.js';
import { filesApi } from './helpers.js';

/** Set by the test: the store's put for that path waits until its body has closed. */
let holdUntilClosed: { key: string; called: () => void; settled: (outcome: unknown) => void } | undefined;

/** The real store, whose put waits for a body to close first when the test asks it to. */
function storeThatWaitsForTheClient(real: ObjectStore): ObjectStore {
  const put: ObjectStore['put'] = async (key, body: Readable, options) => {
    const hold = holdUntilClosed;
    if (hold?.key !== key) return real.put(key, body, options);
    hold.called();
    if (!body.closed) await once(body, 'close').catch(() => {});
    return real.put(key, body, options).then(
      (info) => {
        hold.settled(info);
        return info;
      },
      (error: unknown) => {
        hold.settled(error);
        throw error;
      },
    );
  };
  return new Proxy(real, {
    get: (target, name) => (name === 'put' ? put : Reflect.get(target, name, target)),
  });
}

let t: Awaited<ReturnType<typeof createTestApp>>;
let origin: string;
beforeAll(async () => {
  t = await createTestApp({
    setup: TENANCY_SETUP,
    store: (config) => storeThatWaitsForTheClient(createObjectStore(config)),
  });
  origin = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(() => t.close());

describe(`a signed PUT whose client leaves before the store reads its body (${engineName})`, () => {
  it('fails the write as cut off and leaves no temp file, instead of waiting for the body forever', async () => {
    const res = await filesApi(t.app).requestUpload({
      filename: 'early.bin',
      contentType: 'application/octet-stream',
      sizeBytes: 1000,
    });
    const { uploadUrl, storagePath } = res.json().data as { uploadUrl: string; storagePath: string };
    const called = deferred();
    let settle!: (outcome: unknown) => void;
    const settled = new Promise<unknown>((resolve) => (settle = resolve));
    holdUntilClosed = { key: storagePath, called: called.resolve, settled: settle };

    const request = http.request(uploadUrl.replace(/^http:\/\/[^/]+/, origin), {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream', 'content-length': '1000' },
    });
    request.on('error', () => {});
    request.write(Buffer.alloc(100, 1));
    // The handler has reached the store: the client leaves before the store reads a byte.
    await called.promise;
    request.destroy();

    expect(await settled).toMatchObject({ code: 'bad_request', message: expect.stringContaining('cut off') });
    expect(readdirSync(path.join(t.env.config.dataDir, 'objects', 'tmp'))).toEqual([]);
    expect(await t.store.head(storagePath)).toBeNull();
    holdUntilClosed = undefined;
  });
});
