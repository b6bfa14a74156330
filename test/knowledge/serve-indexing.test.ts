import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/database.js';
import { engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import {
  answerAndLog,
  type ServeCluster,
  type ServeProcess,
  startServeCluster,
} from '../helpers/serve-processes.js';
import { slowPdfFile, type TestFile, textFile } from './files.js';

const OWNER = { 'x-service-api-key': KEYS.mainOwner };
const PROJECT_URL = (server: ServeProcess) => `${server.url}/v1/projects/prj_docs`;
let cluster: ServeCluster | undefined;
afterEach(async () => {
  await cluster?.close();
  cluster = undefined;
});

async function call<T>(
  url: string,
  init: RequestInit = {},
): Promise<{ status: number; data: T; body: unknown }> {
  const response = await fetch(url, { ...init, headers: { ...OWNER, ...(init.headers ?? {}) } });
  const body = (await response.json()) as { data: T };
  return { status: response.status, data: body.data, body };
}

async function upload(server: ServeProcess, file: TestFile) {
  const cut = file.path.lastIndexOf('/');
  const { status, data, body } = await call<{ uploadUrl: string }>(`${PROJECT_URL(server)}/files/upload`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      filename: file.path.slice(cut + 1),
      folder: cut < 0 ? undefined : file.path.slice(0, cut),
      contentType: file.mediaType,
      sizeBytes: file.bytes.length,
    }),
  });
  // The answer, and what the process logged, when it is not a 200: what to look at if it fails.
  expect(status, answerAndLog(server, body)).toBe(200);
  const put = await fetch(data.uploadUrl, {
    method: 'PUT',
    headers: { 'content-type': file.mediaType },
    body: new Uint8Array(file.bytes),
  });
  expect(put.status).toBe(200);
}

type Summary = { files: Record<string, number>; chunks: number };
const summary = async (server: ServeProcess) => (await call<Summary>(`${PROJECT_URL(server)}/index`)).data;

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The indexing log lines of a process: which files it extracted. */
function extractedFileIds(server: ServeProcess): string[] {
  return server
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { msg?: string; fileId?: string })
    .filter((entry) => entry.fileId && /project file/.test(entry.msg ?? ''))
    .map((entry) => entry.fileId!);
}

/** Reads the cluster's database directly. */
async function withDatabase<T>(fn: (db: Awaited<ReturnType<typeof openDatabase>>['db']) => Promise<T>) {
  const database = await openDatabase(loadConfig(cluster!.env).database);
  try {
    return await fn(database.db);
  } finally {
    await database.close();
  }
}

describe(`indexing with atrium serve processes (${engineName})`, () => {
  it('two processes index one project: every file once, all searchable', async () => {
    cluster = await startServeCluster({ processes: 2, setup: TENANCY_SETUP });
    const [first, second] = cluster.servers as [ServeProcess, ServeProcess];
    const files = Array.from({ length: 24 }, (_, i) =>
      textFile(`notes/note-${i}.md`, `# Note ${i}\n\nThe code word of note ${i} is token${i}x.`),
    );
    for (const file of files) await upload(first, file);
    // Both processes are told: one by its sync, the other by polling.
    expect(
      (await call<{ added: number }>(`${PROJECT_URL(second)}/files/sync`, { method: 'POST' })).data.added,
    ).toBe(24);
    await waitUntil(async () => (await summary(first)).files.indexed === 24, 120_000, 'all files indexed');
    // A process logs a batch after its commit, and the pipe may deliver the lines after the
    // summary above already counts the batch: wait for them too.
    const extracted = () => [...extractedFileIds(first), ...extractedFileIds(second)];
    await waitUntil(async () => extracted().length >= 24, 10_000, 'the indexing log lines');
    const ids = extracted();
    expect(ids).toHaveLength(24);
    expect(new Set(ids).size).toBe(24);
    expect((await summary(second)).chunks).toBe(24);
    const hit = await call<{ results: Array<{ path: string }> }>(`${PROJECT_URL(first)}/search?q=token17x`);
    expect(hit.data.results.map((result) => result.path)).toEqual(['notes/note-17.md']);
  }, 240_000);

  it('a process killed mid-index: another takes the file once the lease lapses; indexed once, no duplicate chunks', async () => {
    cluster = await startServeCluster({
      processes: 1,
      setup: TENANCY_SETUP,
      env: { ATRIUM_INDEX_LEASE_MS: '1500', ATRIUM_INDEX_POLL_MS: '200', ATRIUM_INDEX_TIMEOUT_MS: '240000' },
    });
    const victim = cluster.servers[0]!;
    // Seconds to extract: the process is killed while it works on it.
    await upload(victim, slowPdfFile('docs/slow.pdf'));
    await call(`${PROJECT_URL(victim)}/files/sync`, { method: 'POST' });
    await waitUntil(async () => (await summary(victim)).files.indexing === 1, 60_000, 'indexing to start');
    await victim.stop('SIGKILL');

    const survivor = await cluster.start();
    await waitUntil(async () => (await summary(survivor)).files.indexed === 1, 200_000, 'the file indexed');
    const chunks = await withDatabase(async (db) =>
      db.selectFrom('knowledge_chunks').select(['file_id', 'ordinal']).orderBy('ordinal').execute(),
    );
    expect(chunks.length).toBeGreaterThan(0);
    expect(chunks.map((chunk) => chunk.ordinal)).toEqual(chunks.map((_, i) => i));
    expect((await summary(survivor)).chunks).toBe(chunks.length);
    const row = await withDatabase(async (db) =>
      db
        .selectFrom('project_files')
        .select(['index_status', 'index_claimed_by', 'index_attempts'])
        .executeTakeFirstOrThrow(),
    );
    expect(row).toEqual({ index_status: 'indexed', index_claimed_by: null, index_attempts: 0 });
  }, 300_000);
});
