import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddingWords } from '../../src/models/echo-embedding.js';
import { engineName } from '../helpers/app.js';
import { type FakeEmbeddings, startFakeEmbeddings } from '../helpers/fake-embeddings.js';
import { type ServeCluster, startServeCluster } from '../helpers/serve-processes.js';

const KEY = 'atr_ws_fixture_embeddings_serve_0000000000';
const PROJECT = 'prj_es';
const HEADERS = { 'x-service-api-key': KEY };

function setup(baseURL: string) {
  return `
providers:
  - { id: fake, type: openai-compatible, baseURL: "${baseURL}" }
models:
  - { id: embed, provider: fake, model: hash-256, kind: embedding, pricing: { inputPerMTok: 0.1 } }
organizations:
  - id: org_es
    name: ES
    users: [{ id: usr_es, name: ES, email: es@es.test }]
    workspaces:
      - id: wsp_es
        name: ES
        embeddingModel: embed
        members: [{ user: usr_es, role: owner }]
        apiKeys: [{ name: es, user: usr_es, key: "${KEY}" }]
        projects:
          - { id: ${PROJECT}, name: Embedded }
`;
}

interface IndexSummary {
  files: Record<string, number>;
  chunks: number;
  embeddingModel: string | null;
  vectors: string;
  vectorsError: string | null;
}

async function api<T>(url: string, init: RequestInit = {}): Promise<{ status: number; data: T }> {
  const response = await fetch(url, { ...init, headers: { ...HEADERS, ...init.headers } });
  return { status: response.status, data: ((await response.json()) as { data: T }).data };
}

async function upload(server: { url: string }, filename: string, text: string) {
  const { status, data } = await api<{ uploadUrl: string }>(
    `${server.url}/v1/projects/${PROJECT}/files/upload`,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ filename, contentType: 'text/markdown', sizeBytes: Buffer.byteLength(text) }),
    },
  );
  expect(status).toBe(200);
  const put = await fetch(data.uploadUrl, {
    method: 'PUT',
    headers: { 'content-type': 'text/markdown' },
    body: text,
  });
  expect(put.status).toBe(200);
}

async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + 60_000;
  let value = await read();
  while (!done(value)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    value = await read();
  }
  return value;
}

const LONG = (topic: string, n: number) =>
  `# ${topic}\n\n` +
  Array.from(
    { length: n },
    (_, i) => `Paragraph ${i} about ${topic}: the ${topic} procedure step ${i}.`,
  ).join('\n\n');

describe(`embeddings in two atrium serve processes (${engineName})`, () => {
  let fake: FakeEmbeddings;
  let cluster: ServeCluster;
  const summary = (server: { url: string }) =>
    api<IndexSummary>(`${server.url}/v1/projects/${PROJECT}/index`).then((r) => r.data);

  beforeAll(async () => {
    fake = await startFakeEmbeddings();
    // One after the other: two starting at once on a loaded machine can exceed the helper's wait.
    cluster = await startServeCluster({ processes: 1, setup: setup(fake.baseURL) });
    await cluster.start();
  }, 180_000);
  afterAll(async () => {
    await cluster?.close();
    await fake?.close();
  });

  it('indexes, then embeds each chunk once across processes; search is hybrid; tokens are in the usage report', async () => {
    const [first, second] = cluster.servers as [ServeCluster['servers'][0], ServeCluster['servers'][0]];
    await upload(first, 'failover.md', LONG('database failover', 60));
    await upload(first, 'billing.md', LONG('invoice billing', 40));
    await upload(first, 'onboarding.md', LONG('employee onboarding', 20));
    expect((await api(`${first.url}/v1/projects/${PROJECT}/files/sync`, { method: 'POST' })).status).toBe(
      200,
    );

    const vectorsAvailable = engineName === 'sqlite';
    const done = await waitFor(
      () => summary(second),
      (s) => s.files.indexed === 3 && s.vectors === (vectorsAvailable ? 'ready' : 'unavailable'),
      'indexing and embedding',
    );
    expect(done.embeddingModel).toBe('embed');
    const ready = await (await fetch(`${first.url}/readyz`)).json();
    expect(ready).toMatchObject({ status: 'ready', vectors: vectorsAvailable ? 'available' : 'unavailable' });

    const search = await api<{ results: { path: string }[] }>(
      `${second.url}/v1/projects/${PROJECT}/search?q=${encodeURIComponent('failover procedure')}&limit=3`,
    );
    expect(search.status).toBe(200);
    expect(search.data.results[0]?.path).toBe('failover.md');
    if (!vectorsAvailable) {
      expect(done.vectorsError).toMatch(/vector/);
      expect(fake.requests).toHaveLength(0);
      return;
    }
    // Both processes embed in the background; the lease lets one at a time work a workspace,
    // so every chunk went to the provider once (plus the one search query).
    const embeddedChunks = fake.requests.slice(0, -1).reduce((sum, request) => sum + request.input.length, 0);
    expect(embeddedChunks).toBe(done.chunks);
    expect(fake.requests.at(-1)!.input).toEqual(['failover procedure']);

    const usage = await api<{
      inputTokens: number;
      byModel: { model: string; inputTokens: number }[];
      byAgent: unknown[];
    }>(`${first.url}/v1/workspace/wsp_es/usage`);
    // The fake counts a token per word, as the development model does.
    const words = fake.requests.flatMap((r) => r.input).reduce((sum, t) => sum + embeddingWords(t).length, 0);
    expect(usage.data.byModel).toEqual([expect.objectContaining({ model: 'embed', inputTokens: words })]);
    expect(usage.data.inputTokens).toBe(words);
    expect(usage.data.byAgent).toEqual([]);
  });

  it('a failing provider leaves files indexed and search lexical, shows why, and recovers', async () => {
    if (engineName !== 'sqlite') return; // No vectors on this PostgreSQL: nothing is embedded.
    const [first, second] = cluster.servers as [ServeCluster['servers'][0], ServeCluster['servers'][0]];
    fake.mode = 'fail';
    await upload(first, 'backups.md', LONG('nightly backups', 5));
    await api(`${first.url}/v1/projects/${PROJECT}/files/sync`, { method: 'POST' });
    const failing = await waitFor(
      () => summary(second),
      (s) => s.files.indexed === 4 && s.vectorsError !== null,
      'a failed embedding attempt',
    );
    expect(failing.vectors).toBe('building');
    expect(failing.vectorsError).toBe('the embedding provider answered HTTP 500');
    const search = await api<{ results: { path: string }[] }>(
      `${first.url}/v1/projects/${PROJECT}/search?q=${encodeURIComponent('nightly backups')}`,
    );
    expect(search.status).toBe(200);
    expect(search.data.results[0]?.path).toBe('backups.md');

    fake.mode = 'ok';
    const recovered = await waitFor(
      () => summary(first),
      (s) => s.vectors === 'ready',
      'recovery',
    );
    expect(recovered.vectorsError).toBeNull();
  });
});
