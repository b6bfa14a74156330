/**
 * Issue 12 (embeddings): project search at 10,000 chunks on SQLite, hybrid (lexical + sqlite-vec
 * vectors merged by reciprocal-rank fusion) against lexical alone, in the same run on the same
 * chunks. Vectors come from `atrium/echo-embedding` (256 dimensions, in process); the query
 * embeddings are warmed first, so the figure is the database side of a search (a provider's
 * embedding call, paid once per new question, comes on top). In process, no HTTP.
 */
import { rmSync } from 'node:fs';
import { migrateToLatest, openDatabase } from '../src/db/database.js';
import { insertChunks } from '../src/db/repositories/knowledge.js';
import { Embedder } from '../src/knowledge/embedder.js';
import { searchProject } from '../src/knowledge/search.js';
import { attachKnowledgeVectors, KnowledgeVectors } from '../src/knowledge/vectors.js';
import { ModelRegistry } from '../src/models/registry.js';
import { applySetup } from '../src/setup/apply.js';
import type { Report } from './run.js';
import { benchDataDir } from './support/bench-setup.js';

const CHUNKS = Number(process.env.BENCH_VECTOR_CHUNKS ?? 10_000);
const FILES = 200;
const QUERIES = Number(process.env.BENCH_VECTOR_QUERIES ?? 200);

/** A deterministic word list and text generator (a linear congruential sequence). */
function generator() {
  let seed = 12345;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  const syllables = ['ka', 'lo', 'mi', 'ren', 'tas', 'vo', 'ne', 'qui', 'dor', 'sa', 'pel', 'ux'];
  const vocabulary = Array.from({ length: 4_000 }, () =>
    Array.from({ length: 2 + (next() % 3) }, () => syllables[next() % syllables.length]).join(''),
  );
  // Zipf-like: low indexes are common words.
  const word = () => vocabulary[Math.floor(vocabulary.length * (next() / 2 ** 31) ** 2.5)]!;
  return { words: (n: number) => Array.from({ length: n }, word).join(' ') };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

async function timeQueries(run: (query: string) => Promise<unknown>, queries: string[]): Promise<number[]> {
  const times: number[] = [];
  for (const query of queries) {
    const started = performance.now();
    await run(query);
    times.push(performance.now() - started);
  }
  return times.sort((a, b) => a - b);
}

export async function run(report: Report): Promise<void> {
  const { dataDir, config } = benchDataDir('vectors');
  const database = await openDatabase(config.database);
  try {
    await migrateToLatest(database.db);
    const db = database.db;
    await applySetup(
      db,
      {
        organizations: [
          {
            id: 'org_bv',
            name: 'Bench',
            workspaces: [
              {
                id: 'wsp_bv',
                name: 'Bench',
                embeddingModel: 'atrium/echo-embedding',
                projects: [{ id: 'prj_bv', name: 'Bench' }],
              },
            ],
          },
        ],
      },
      { now: new Date() },
    );
    const text = generator();
    const now = new Date().toISOString();
    const perFile = CHUNKS / FILES;
    for (let f = 0; f < FILES; f++) {
      const id = `fil_bv_${f}`;
      await db
        .insertInto('project_files')
        .values({
          id,
          workspace_id: 'wsp_bv',
          project_id: 'prj_bv',
          name: `${id}.md`,
          path: `docs/${id}.md`,
          mime_type: 'text/markdown',
          size_bytes: 1,
          etag: 'e',
          type: 'file',
          created_at: now,
          updated_at: now,
          synced_at: now,
          index_status: 'indexed',
          indexed_etag: 'e',
        })
        .execute();
      await insertChunks(
        db,
        { id, workspace_id: 'wsp_bv', project_id: 'prj_bv' },
        Array.from({ length: perFile }, (_, ordinal) => {
          const body = text.words(220);
          return { ordinal, text: body, heading: null, pages: null, start: 0, end: body.length };
        }),
      );
    }
    const queries = Array.from({ length: QUERIES }, () => text.words(6));
    const search = (query: string) => searchProject(db, { projectId: 'prj_bv', query, limit: 10 });

    // Lexical first: no vector side attached yet.
    await timeQueries(search, queries.slice(0, 20));
    const lexical = await timeQueries(search, queries);

    const vectors = new KnowledgeVectors(db, new ModelRegistry(config));
    if (!(await vectors.support()).available) {
      report(`knowledge vectors: skipped, sqlite-vec does not load here`);
      return;
    }
    attachKnowledgeVectors(vectors);
    const started = performance.now();
    await new Embedder(vectors, {
      processId: 'prc_bench',
      requestTimeoutMs: 60_000,
      batchSize: 500,
    }).runUntilIdle();
    const embedSeconds = (performance.now() - started) / 1000;
    await timeQueries(search, queries); // warms the query embeddings
    const hybrid = await timeQueries(search, queries);

    const fmt = (ms: number) => `${ms.toFixed(2)} ms`;
    report(
      `search at ${CHUNKS} chunks (SQLite, ${QUERIES} queries of 6 words): lexical p50 ${fmt(percentile(lexical, 0.5))} p95 ${fmt(percentile(lexical, 0.95))}`,
    );
    report(
      `  hybrid (256-dim vectors, sqlite-vec exact scan + RRF) p50 ${fmt(percentile(hybrid, 0.5))} p95 ${fmt(percentile(hybrid, 0.95))}` +
        ` = ${(percentile(hybrid, 0.5) / percentile(lexical, 0.5)).toFixed(2)}× lexical p50`,
    );
    report(
      `  embedding ${CHUNKS} chunks in the background (echo model, in process): ${embedSeconds.toFixed(1)} s`,
    );
  } finally {
    await database.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
