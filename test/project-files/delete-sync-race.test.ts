import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineName } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { type ServeCluster, startServeCluster } from '../helpers/serve-processes.js';
import { OWNER, PROJECT } from './helpers.js';

/** Before the fix, two processes brought deleted files back in most runs of this many rounds. */
const ROUNDS = 8;
const FILES_PER_ROUND = 6;
/** Files that stay: a longer listing widens the window between a sync's two reads. */
const RESIDENT_FILES = 200;

let cluster: ServeCluster;
beforeAll(async () => {
  // The sync loops below send requests back to back for as long as the deletes take: on a loaded
  // CI machine that can pass the default 600 requests a minute, which is not what this tests.
  cluster = await startServeCluster({
    processes: 2,
    setup: TENANCY_SETUP,
    env: { ATRIUM_RATE_LIMIT_PER_MINUTE: '0' },
  });
}, 150_000);
afterAll(async () => {
  await cluster?.close();
});

interface FileView {
  id: string;
  path: string;
}

async function call<T>(url: string, init: RequestInit = {}): Promise<{ status: number; data: T }> {
  const response = await fetch(url, { ...init, headers: { ...OWNER, ...init.headers } });
  const body = (await response.json()) as { data: T };
  return { status: response.status, data: body.data };
}

const filesUrl = (server: { url: string }) => `${server.url}/v1/projects/${PROJECT}/files`;

async function uploadFile(server: { url: string }, filename: string, text: string, folder?: string) {
  const { status, data } = await call<{ uploadUrl: string }>(`${filesUrl(server)}/upload`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ filename, folder, contentType: 'text/plain', sizeBytes: Buffer.byteLength(text) }),
  });
  expect(status).toBe(200);
  const put = await fetch(data.uploadUrl, {
    method: 'PUT',
    headers: { 'content-type': 'text/plain' },
    body: text,
  });
  expect(put.status).toBe(200);
}

const sync = (server: { url: string }) => call<unknown>(`${filesUrl(server)}/sync`, { method: 'POST' });
async function list(server: { url: string }) {
  const answer = await call<{ files: FileView[] }>(filesUrl(server));
  expect(answer.status, JSON.stringify(answer)).toBe(200);
  return answer.data.files;
}

describe(`deleting project files while two atrium serve processes sync (${engineName})`, () => {
  it('a deleted file is never listed again by a sync that raced its delete', async () => {
    const first = cluster.servers[0]!;
    const second = cluster.servers[1]!;
    const resurrected: string[] = [];
    const residents = Array.from({ length: RESIDENT_FILES }, (_, i) => `resident/${i}.txt`);
    for (let i = 0; i < residents.length; i += 20) {
      await Promise.all(
        residents.slice(i, i + 20).map((name) => uploadFile(first, name.split('/')[1]!, name, 'resident')),
      );
    }
    for (let round = 0; round < ROUNDS; round++) {
      const names = Array.from({ length: FILES_PER_ROUND }, (_, i) => `round-${round}-${i}.txt`);
      await Promise.all(names.map((name) => uploadFile(first, name, `content of ${name}`)));

      // Syncs run back to back on both processes from before the files are registered until
      // every delete has answered, so they overlap each delete at every step.
      let deleting = true;
      const syncLoop = async (server: { url: string }) => {
        let runs = 0;
        while (deleting || runs === 0) {
          const answer = await sync(server);
          expect(answer.status, JSON.stringify(answer)).toBe(200);
          runs++;
        }
      };
      const loops = [syncLoop(first), syncLoop(second), syncLoop(second)];
      let registered: FileView[] = [];
      while (registered.length < names.length) {
        registered = (await list(first)).filter((file) => names.includes(file.path));
      }
      const deletes = await Promise.all(
        registered.map((file, i) =>
          call(`${filesUrl(i % 2 === 0 ? first : second)}/${file.id}`, { method: 'DELETE' }),
        ),
      );
      deleting = false;
      await Promise.all(loops);
      expect(deletes.map((result) => result.status)).toEqual(registered.map(() => 200));

      // No sync runs now: what is listed is what the raced syncs left behind.
      const left = (await list(second)).filter((file) => names.includes(file.path));
      resurrected.push(...left.map((file) => `${file.path} (${file.id})`));
    }
    expect(resurrected).toEqual([]);
    // 200 uploads and 8 raced rounds on two processes: a loaded CI machine needs more than 20 s.
  }, 90_000);
});
