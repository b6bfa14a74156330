import { Readable } from 'node:stream';
import type { UIMessageChunk } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Indexer, startIndexer, waitForIndexIdle } from '../../src/knowledge/indexer.js';
import { retrieveForTurn } from '../../src/knowledge/retrieval.js';
import { projectStoragePrefix } from '../../src/services/project-files.js';
import type { TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, userText } from '../chat/fixtures.js';
import { EventReader } from '../chat/sse-reader.js';
import { buildRetrievalSet, type RetrievalSet } from './retrieval-set.js';
import { watchedStore, startWatchedChatApp } from './turn-fixtures.js';

/**
 * Each turn on files that went the real way: stored, synced, indexed by the background indexer
 * (extraction in worker threads), then retrieved by turns that read no object storage. The
 * files and questions are the labelled retrieval set (test/knowledge/retrieval-set.ts).
 */

let upstream: FakeUpstream;
let t: TestApp;
let watch: ReturnType<typeof watchedStore>;
let baseUrl: string;
let set: RetrievalSet;
let indexer: Indexer;

const PROJECT = { id: 'prj_docs', workspace_id: 'wsp_main' };

beforeAll(async () => {
  upstream = await startFakeUpstream();
  ({ t, watch, baseUrl } = await startWatchedChatApp(upstream));
  set = await buildRetrievalSet();
  const prefix = projectStoragePrefix(PROJECT.workspace_id, PROJECT.id);
  for (const file of set.files) {
    await t.store.put(`${prefix}${file.path}`, Readable.from([file.bytes]), { contentType: file.mediaType });
  }
  const synced = await t.app.inject({
    method: 'POST',
    url: `/v1/projects/${PROJECT.id}/files/sync`,
    headers: { 'x-service-api-key': CHAT_KEYS.main },
  });
  expect(synced.statusCode).toBe(200);
  indexer = startIndexer({
    db: t.db,
    store: t.store,
    config: t.env.config.indexing,
    storageKey: (file) => projectStoragePrefix(file.workspace_id, file.project_id) + file.path,
  });
  await waitForIndexIdle(t.db, { projectId: PROJECT.id, timeoutMs: 120_000 });
}, 180_000);
afterAll(async () => {
  await indexer?.stop();
  await t.close();
  await upstream.close();
});

describe('turns over an indexed project', () => {
  it('gives the answering file among the excerpts for most questions of the labelled set', async () => {
    let found = 0;
    const missed: string[] = [];
    for (const { question, expectedPath } of set.questions) {
      const knowledge = await retrieveForTurn(t.db, PROJECT, question);
      expect(knowledge.excerpts.length).toBeGreaterThan(0);
      if (knowledge.sources.some((source) => source.path === expectedPath)) found++;
      else missed.push(`${question} → ${expectedPath}`);
    }
    const recall = found / set.questions.length;
    console.log(
      `each-turn excerpts: ${found}/${set.questions.length} questions have their file among the excerpts (${recall.toFixed(2)})`,
    );
    expect(recall, missed.join('\n')).toBeGreaterThanOrEqual(0.85);
  });

  it('streams citations with pages for a fact inside a PDF, reading no object storage', async () => {
    const pdfQuestion = set.questions.find((q) => q.expectedPath.endsWith('.pdf'));
    expect(pdfQuestion).toBeDefined();
    watch.forbid(true);
    try {
      const response = await fetch(`${baseUrl}/v1/chat`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-service-api-key': CHAT_KEYS.main },
        body: JSON.stringify({
          agentId: 'agt_plain',
          projectId: PROJECT.id,
          stream: true,
          messages: [userText(pdfQuestion!.question)],
        }),
      });
      const reader = new EventReader(response);
      const chunks = await reader.all();
      expect(chunks.at(-1)?.type).toBe('finish');
      const sources = chunks.filter(
        (c): c is Extract<UIMessageChunk, { type: 'source-document' }> => c.type === 'source-document',
      );
      const pdf = sources.find((source) => source.title === pdfQuestion!.expectedPath);
      expect(pdf).toMatchObject({
        mediaType: 'application/pdf',
        sourceId: expect.stringMatching(/^fil_.+#\d+$/),
      });
      const n = Number(pdf!.sourceId.split('#')[1]);
      const system = upstream.lastRequest().body.messages?.[0]?.content as string;
      expect(system).toMatch(
        new RegExp(
          `<excerpt n="${n}" path="${pdfQuestion!.expectedPath.replaceAll('.', '\\.')}"[^>]* pages="\\d+(-\\d+)?">`,
        ),
      );
      expect(watch.reads).toEqual([]);
    } finally {
      watch.forbid(false);
    }
  });
});
