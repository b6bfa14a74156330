import { readdirSync, readFileSync, statSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.js';
import { sweepStaleUploads } from '../../src/http/skill-upload-spool.js';
import { sweepOrphanSkillObjects } from '../../src/services/skills.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { engineName } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type ServeCluster, type ServeProcess, startServeCluster } from '../helpers/serve-processes.js';
import { multipartBody, skillMd } from '../skills/zip-builder.js';

/**
 * Fault injection: a real `atrium serve` is killed with SIGKILL in the middle of a signed
 * upload, a streamed chat reply, a skills upload and a sync, then started again on the same
 * database and data dir. After each kill the database and storage must be consistent: no record
 * without its object, no half-written record, and nothing left in storage that a sync or one of
 * the sweeps cannot explain.
 */

const KEY = 'atr_ws_fault_injection_owner_0000000000000000';
const WS = 'wsp_fault';
const PROJECT = 'prj_fault';
const UPSTREAM_KEY = 'sk-fault-injection-upstream-000000000000000000';

let upstream: FakeUpstream;
let cluster: ServeCluster;
let server: ServeProcess;
let database: DatabaseHandle;
let store: FsObjectStore;
let objectsRoot: string;

const setup = (baseURL: string) => `
providers:
  - { id: fake, type: openai-compatible, baseURL: ${baseURL}, apiKey: "${UPSTREAM_KEY}" }
models:
  - { id: fake-small, provider: fake, model: small-1, pricing: { inputPerMTok: 1, outputPerMTok: 2 } }
organizations:
  - id: org_fault
    name: Fault
    users:
      - { id: usr_fault, name: Fay, email: fay@fault.test }
    workspaces:
      - id: ${WS}
        name: Fault
        models: [fake-small]
        defaultModel: fake-small
        members:
          - { user: usr_fault, role: owner }
        apiKeys:
          - { name: owner, user: usr_fault, key: "${KEY}" }
        agents:
          - { id: agt_fault, title: Fault }
        projects:
          - { id: ${PROJECT}, name: Fault }
`;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  cluster = await startServeCluster({ processes: 1, setup: setup(upstream.baseURL) });
  server = cluster.servers[0]!;
  const config = loadConfig(cluster.env);
  if (config.storage.kind !== 'fs') throw new Error('fault injection runs on fs storage');
  objectsRoot = config.storage.root;
  // The test's own view of what the processes left: the same database and data dir.
  database = await openDatabase(config.database);
  store = new FsObjectStore({
    root: objectsRoot,
    signingSecret: config.signingSecret,
    clock: () => new Date(),
    fallbackOrigin: 'http://127.0.0.1:1',
  });
}, 150_000);
afterAll(async () => {
  upstream?.release();
  await database?.close();
  await cluster?.close();
  await upstream?.close();
});

const api = (pathname: string, init: RequestInit = {}) =>
  fetch(`${server.url}${pathname}`, { ...init, headers: { 'x-service-api-key': KEY, ...init.headers } });

/** Kills the serving process with SIGKILL and starts a new one on the same database and data dir. */
async function killAndRestart(): Promise<void> {
  await server.stop('SIGKILL');
  server = await cluster.start();
  expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
}

/** Resolves once `condition` holds, looking every few milliseconds (a wait, not an assertion). */
async function until(condition: () => boolean, what: string, attempts = 20_000): Promise<void> {
  for (let i = 0; i < attempts; i++) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`gave up waiting for ${what}`);
}

function filesUnder(dir: string): string[] {
  try {
    return readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => path.join(entry.parentPath, entry.name));
  } catch {
    return [];
  }
}

async function objectKeys(prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const info of store.list(prefix)) keys.push(info.key);
  return keys.sort();
}

/**
 * What must hold after any kill, once the new process runs and nothing is in flight. Runs the
 * sweeps and a sync the way the service would (with every leftover counted as old enough), and
 * returns every problem found.
 */
async function consistencyProblems(): Promise<string[]> {
  const { db } = database;
  const problems: string[] = [];

  // Skills: every row has its SKILL.md; objects without a row are what the orphan sweep removes.
  const skills = await db.selectFrom('skills').select(['id', 'storage_path']).execute();
  for (const skill of skills) {
    if (!(await store.head(`${skill.storage_path}SKILL.md`)))
      problems.push(`skill ${skill.id} without SKILL.md`);
  }
  await sweepOrphanSkillObjects(db, store, new Date(Date.now() + 2 * 60 * 60 * 1000), {
    warn: (_details, message) => problems.push(message),
  });
  // Each object left is in the folder of its skill's current version (a version folder inside
  // a never-replaced skill's folder is not).
  const skillPrefixes = new Set(skills.map((skill) => skill.storage_path));
  for (const key of await objectKeys('skills/')) {
    const root = key.split('/').slice(0, 3).join('/') + '/';
    const first = key.slice(root.length).split('/')[0]!;
    const version = first.startsWith('.atrium-version-') ? `${root}${first}/` : root;
    if (!skillPrefixes.has(version)) problems.push(`skill object no sweep explains: ${key}`);
  }

  // Project files: every row has its object, of the recorded size; a sync then accounts for
  // every object (what it adds was a finished upload), and a second one finds nothing to do.
  const files = await db.selectFrom('project_files').selectAll().execute();
  for (const row of files) {
    const info = await store.head(`projects/${row.workspace_id}/${row.project_id}/${row.path}`);
    if (!info) problems.push(`file row without object: ${row.path}`);
    else if (info.size !== Number(row.size_bytes)) problems.push(`file row of another size: ${row.path}`);
  }
  const first = await api(`/v1/projects/${PROJECT}/files/sync`, { method: 'POST' });
  const second = await api(`/v1/projects/${PROJECT}/files/sync`, { method: 'POST' });
  if (first.status !== 200 || second.status !== 200)
    problems.push(`sync answered ${first.status}/${second.status}`);
  const secondResult = ((await second.json()) as { data?: unknown }).data;
  if (JSON.stringify(secondResult) !== JSON.stringify({ added: 0, removed: 0, updated: 0 })) {
    problems.push(`second sync still changed things: ${JSON.stringify(secondResult)}`);
  }
  const registered = (await db.selectFrom('project_files').select('path').execute()).map((row) => row.path);
  const stored = (await objectKeys(`projects/${WS}/${PROJECT}/`)).map((key) =>
    key.split('/').slice(3).join('/'),
  );
  if (JSON.stringify(registered.sort()) !== JSON.stringify(stored.sort())) {
    problems.push('records and objects differ after sync');
  }

  // Objects: no torn object (each matches the size its write recorded), and after the sweep no
  // temp file, no skill spool directory and no metadata record without its object.
  for (const file of filesUnder(path.join(objectsRoot, 'versions'))) {
    const relative = path.relative(path.join(objectsRoot, 'versions'), file);
    const key = path.dirname(relative);
    const record = JSON.parse(readFileSync(file, 'utf8')) as { size: number };
    const data = path.join(objectsRoot, 'data', key);
    const stat = statSync(data, { throwIfNoEntry: false });
    if (stat && `${stat.size}` !== path.basename(relative).split('-')[0]) continue; // another version's record
    if (stat && stat.size !== record.size) problems.push(`torn object: ${key}`);
  }
  await store.sweepStaleTemp(-60 * 60 * 1000);
  await sweepStaleUploads(
    path.join(cluster.dataDir, 'tmp', 'skill-uploads'),
    0,
    new Date(Date.now() + 2 * 60 * 60 * 1000),
  );
  for (const file of filesUnder(path.join(objectsRoot, 'tmp'))) problems.push(`temp file left: ${file}`);
  for (const file of filesUnder(path.join(cluster.dataDir, 'tmp', 'skill-uploads'))) {
    problems.push(`skill spool file left: ${file}`);
  }
  for (const file of filesUnder(path.join(objectsRoot, 'versions'))) {
    const relative = path.relative(path.join(objectsRoot, 'versions'), file);
    const stat = statSync(path.join(objectsRoot, 'data', path.dirname(relative)), {
      bigint: true,
      throwIfNoEntry: false,
    });
    if (!stat || path.basename(relative) !== `${stat.size}-${stat.mtimeNs}.json`) {
      problems.push(`metadata record without its object: ${relative}`);
    }
  }

  // Chats: every message readable, positions 0..n-1 in each chat, usage counted exactly once.
  const messages = await db
    .selectFrom('messages')
    .selectAll()
    .orderBy('chat_id')
    .orderBy('position')
    .execute();
  const positions = new Map<string, number[]>();
  for (const message of messages) {
    try {
      if (!Array.isArray(JSON.parse(message.parts))) problems.push(`message ${message.id}: parts not a list`);
    } catch {
      problems.push(`message ${message.id}: parts not JSON`);
    }
    positions.set(message.chat_id, [...(positions.get(message.chat_id) ?? []), Number(message.position)]);
  }
  for (const [chatId, list] of positions) {
    if (list.some((position, index) => position !== index))
      problems.push(`chat ${chatId}: positions ${list}`);
  }
  const ledger = await db.selectFrom('usage_ledger').select(['input_tokens', 'output_tokens']).execute();
  const ledgerTokens = ledger.reduce(
    (sum, row) => sum + Number(row.input_tokens) + Number(row.output_tokens),
    0,
  );
  const messageTokens = messages.reduce(
    (sum, row) => sum + Number(row.input_tokens) + Number(row.output_tokens),
    0,
  );
  if (ledgerTokens !== messageTokens)
    problems.push(`usage ${ledgerTokens} ≠ tokens of messages ${messageTokens}`);
  return problems;
}

// 180 s a test: a restart alone may take up to the 120 s serve-processes.ts waits for it.
describe(`SIGKILL of atrium serve mid-operation, then a restart (${engineName})`, { timeout: 180e3 }, () => {
  it('mid-upload: the signed PUT leaves no object, only a temp file the sweep removes', async () => {
    const size = 24 * 1024 * 1024;
    const answer = await api(`/v1/projects/${PROJECT}/files/upload`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ filename: 'big.bin', contentType: 'application/octet-stream', sizeBytes: size }),
    });
    const { uploadUrl } = ((await answer.json()) as { data: { uploadUrl: string } }).data;
    const request = http.request(uploadUrl, {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream', 'content-length': size },
    });
    request.on('error', () => {}); // the server dies under it
    request.write(Buffer.alloc(4 * 1024 * 1024, 1));
    await until(
      () =>
        filesUnder(path.join(objectsRoot, 'tmp')).some(
          (file) => (statSync(file, { throwIfNoEntry: false })?.size ?? 0) > 0,
        ),
      'the upload to reach a temp file',
    );
    await killAndRestart();
    request.destroy();

    expect(await store.head(`projects/${WS}/${PROJECT}/big.bin`)).toBeNull();
    expect(await consistencyProblems()).toEqual([]);
    expect(await store.head(`projects/${WS}/${PROJECT}/big.bin`)).toBeNull();
  });

  it('mid-stream: a chat reply cut by the kill stores nothing half-written, and usage matches the messages', async () => {
    const chat = (text: string) =>
      api('/v1/chat', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          agentId: 'agt_fault',
          stream: true,
          messages: [{ role: 'user', parts: [{ type: 'text', text }] }],
        }),
      });
    // One whole reply first, so there is stored usage to compare.
    expect(await (await chat('warm up')).text()).toContain('[DONE]');

    upstream.enqueue({ kind: 'held', text: 'one two three four five six', afterPieces: 3 });
    const response = await chat('cut me off');
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let seen = '';
    // The first three pieces, in one text-delta event or several.
    while (!seen.includes('three ')) {
      const { value, done } = await reader.read();
      if (done) throw new Error('stream ended early');
      seen += value;
    }
    await killAndRestart();
    await reader.cancel().catch(() => {});
    upstream.release();

    expect(await consistencyProblems()).toEqual([]);
  });

  it('mid-skills-upload: no skill row without its files, and the orphans are swept', async () => {
    const names = Array.from({ length: 200 }, (_, i) => `crash-skill-${String(i).padStart(3, '0')}`);
    const { body, contentType } = multipartBody(
      names.map((name) => ({
        name: 'files',
        filename: `${name}.md`,
        contentType: 'text/markdown',
        // 16 KiB of body each (a front matter that long is refused), so storing takes a while.
        content: `${skillMd(name, `Skill ${name}`)}\n${'x'.repeat(16 * 1024)}\n`,
      })),
    );
    const upload = api(`/v1/workspace/${WS}/skills/bulk-upload`, {
      method: 'POST',
      headers: { 'content-type': contentType },
      body,
    }).then(
      (response) => response.status,
      () => 'cut off' as const,
    );
    let finished = false;
    void upload.then(() => (finished = true));
    await until(
      () => finished || filesUnder(path.join(objectsRoot, 'data', 'skills')).length > 0,
      'skill objects to appear',
    );
    await killAndRestart();
    // Killed while storing, the request never got its answer.
    expect(await upload).toBe('cut off');

    expect(await consistencyProblems()).toEqual([]);
  });

  it('mid-sync: a sync killed at any point leaves records that all have their objects', async () => {
    const prefix = `projects/${WS}/${PROJECT}/`;
    for (let round = 0; round < 2; round++) {
      await Promise.all(
        Array.from({ length: 150 }, (_, i) =>
          store.put(`${prefix}sync-${round}/${i}.txt`, Readable.from([Buffer.from(`file ${round}-${i}`)]), {
            contentType: 'text/plain',
            durable: false,
          }),
        ),
      );
      const sync = api(`/v1/projects/${PROJECT}/files/sync`, { method: 'POST' }).then(
        (response) => response.status,
        () => 'cut off' as const,
      );
      // A different point of the sync each round: as it arrives, then while it lists or writes.
      await new Promise((resolve) => setTimeout(resolve, round * 20));
      await killAndRestart();
      await sync;
      expect(await consistencyProblems(), `round ${round}`).toEqual([]);
    }
  });
});
