import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createObjectStore } from '../../src/storage/index.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { engineName } from '../helpers/app.js';
import { OWNER, PROJECT } from '../project-files/helpers.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { type ServeCluster, startServeCluster } from '../helpers/serve-processes.js';

/** Before the fix, two processes paired one write's metadata with another's bytes within this many rounds. */
const ROUNDS = 15;
const WRITERS = 4;
/** Every writer sends as many bytes, so a size check cannot tell the writes apart. */
const SIZE = 64 * 1024;

let cluster: ServeCluster;
let store: ObjectStore;
beforeAll(async () => {
  cluster = await startServeCluster({ processes: 2, setup: TENANCY_SETUP });
  // The test reads what the processes stored through a store of its own on their data dir.
  store = createObjectStore(loadConfig(cluster.env));
}, 150_000);
afterAll(async () => {
  await cluster?.close();
});

async function uploadUrl(server: { url: string }, filename: string, contentType: string): Promise<string> {
  const response = await fetch(`${server.url}/v1/projects/${PROJECT}/files/upload`, {
    method: 'POST',
    headers: { ...OWNER, 'content-type': 'application/json' },
    body: JSON.stringify({ filename, folder: 'race', contentType, sizeBytes: SIZE }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { data: { uploadUrl: string } }).data.uploadUrl;
}

async function readAll(key: string): Promise<Buffer> {
  const object = await store.get(key);
  if (!object) throw new Error(`no object at ${key}`);
  const chunks: Buffer[] = [];
  for await (const chunk of object.body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

describe(`concurrent signed PUTs to one path through two atrium serve processes (${engineName})`, () => {
  it('the stored object always carries the type and etag of the write whose bytes it holds', async () => {
    const servers = cluster.servers;
    const mismatches: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const filename = `round-${round}.bin`;
      const key = `projects/wsp_main/${PROJECT}/race/${filename}`;
      const writers = Array.from({ length: WRITERS }, (_, writer) => ({
        contentType: `application/x-writer-${writer}`,
        body: Buffer.alloc(SIZE, 0x41 + writer),
        server: servers[writer % servers.length]!,
      }));
      const urls = await Promise.all(
        writers.map((writer) => uploadUrl(writer.server, filename, writer.contentType)),
      );
      const etags = await Promise.all(
        writers.map(async (writer, index) => {
          const response = await fetch(urls[index]!, {
            method: 'PUT',
            headers: { 'content-type': writer.contentType },
            body: writer.body,
          });
          expect(response.status).toBe(200);
          return ((await response.json()) as { data: { etag: string } }).data.etag;
        }),
      );

      const bytes = await readAll(key);
      const winner = bytes[0]! - 0x41;
      expect(bytes.equals(writers[winner]!.body)).toBe(true);
      const head = await store.head(key);
      const seen = `${head?.contentType} ${head?.etag}`;
      const expected = `${writers[winner]!.contentType} ${etags[winner]}`;
      if (seen !== expected) mismatches.push(`round ${round}: bytes of writer ${winner}, metadata ${seen}`);
    }
    expect(mismatches).toEqual([]);
  });
});
