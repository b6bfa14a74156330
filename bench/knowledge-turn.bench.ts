/**
 * Issue 12: the latency a project adds to a chat turn at 10,000 chunks (target ≤ 15 ms p50 over
 * the same turn without a project, measured in the same run). The turn is a non-streaming
 * `POST /v1/chat` against a fake upstream in this process; the project holds 400 indexed files
 * of 25 chunks each (Zipf-distributed words, so common terms are common), so each turn searches
 * 10,000 chunks and sends about 16,000 characters of excerpts. Also: retrieval alone
 * (`retrieveForTurn`). SQLite; PostgreSQL too when BENCH_DATABASE_URL is set.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { buildApp } from '../src/app.js';
import { type DatabaseHandle, migrateToLatest, openDatabase } from '../src/db/database.js';
import { retrieveForTurn } from '../src/knowledge/retrieval.js';
import { applySetup } from '../src/setup/apply.js';
import type { SetupFile } from '../src/setup/validate.js';
import { startFakeUpstream } from '../test/helpers/fake-upstream.js';
import { addIndexedFile } from '../test/knowledge/turn-fixtures.js';
import type { Report } from './run.js';
import {
  benchDataDir,
  benchSetup,
  interleavedRounds,
  loadAverage,
  percentile,
  timeEach,
} from './support/bench-setup.js';

const KEY = 'atr_ws_bench_turn_key_00000000000000000000000';
const FILES = 400;
const CHUNKS_PER_FILE = 25;
const CHUNK_CHARS = 1_400;
const REQUESTS = Number(process.env.BENCH_TURN_REQUESTS ?? 300);

function setup(baseURL: string): SetupFile {
  return benchSetup({
    baseURL,
    key: KEY,
    agents: [{ id: 'agt_bench', title: 'Bench', instructions: 'You help with the project.' }],
    projects: [{ id: 'prj_bench', name: 'Bench', instructions: 'Cite sources.' }],
  });
}

/** A vocabulary of made-up words; word i is drawn with weight 1/(i+1) (Zipf). */
const SYLLABLES = 'ka lo mi ne ru sa ti vo ze bu da fe gi ho ju'.split(' ');
const VOCABULARY = Array.from({ length: 4_000 }, (_, i) => {
  let word = '';
  for (let n = i + 1; n > 0; n = Math.floor(n / SYLLABLES.length)) word += SYLLABLES[n % SYLLABLES.length];
  return `${word}${i % 7}`;
});
const CUMULATIVE = (() => {
  let sum = 0;
  return VOCABULARY.map((_, i) => (sum += 1 / (i + 1)));
})();

function randomText(seed: number, chars: number): string {
  let state = seed * 2654435761 + 1;
  const total = CUMULATIVE.at(-1)!;
  const words: string[] = [];
  let length = 0;
  while (length < chars) {
    state = (state * 1103515245 + 12345) % 2147483648;
    const target = (state / 2147483648) * total;
    let lo = 0;
    let hi = CUMULATIVE.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (CUMULATIVE[mid]! < target) lo = mid + 1;
      else hi = mid;
    }
    words.push(VOCABULARY[lo]!);
    length += VOCABULARY[lo]!.length + 1;
  }
  return words.join(' ').slice(0, chars);
}

const fmt = (ms: number) => `${ms.toFixed(2)} ms`;

/** Questions as users ask them: rare words only, and with common words (one in 40% of chunks). */
const QUESTIONS = {
  rare: `Where is ${VOCABULARY[2_500]} used together with ${VOCABULARY[3_100]}?`,
  common: `How do the ${VOCABULARY[40]} and ${VOCABULARY[900]} settings relate to ${VOCABULARY[2_500]} in ${VOCABULARY[3]}?`,
};

async function measure(report: Report, engine: string, database: DatabaseHandle) {
  const upstream = await startFakeUpstream();
  const { dataDir, config } = benchDataDir('turn');
  await applySetup(database.db, setup(upstream.baseURL), { now: new Date() });
  const started = performance.now();
  for (let f = 0; f < FILES; f++) {
    const chunks = Array.from({ length: CHUNKS_PER_FILE }, (_, c) => ({
      text: randomText(f * CHUNKS_PER_FILE + c, CHUNK_CHARS),
      heading: `Section ${c}`,
    }));
    await addIndexedFile(database.db, {
      workspaceId: 'wsp_bench',
      projectId: 'prj_bench',
      path: `docs/${String(f).padStart(3, '0')}.md`,
      text: chunks.map((chunk) => chunk.text).join('\n'),
      chunks,
    });
  }
  // PostgreSQL: the statistics autovacuum gathers within a minute of such a load. Without them the
  // planner has no idea how rare a word is: it filters every chunk of the project instead of
  // asking the GIN index (450 ms a search), and search has no common words to leave out.
  if (database.dialect === 'postgres') await sql`analyze knowledge_chunks`.execute(database.db);
  report(
    `${engine}: ${FILES * CHUNKS_PER_FILE} chunks in ${FILES} files indexed through the repository in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  const app = await buildApp({ config, db: database.db }, { logger: false });
  const origin = await app.listen({ port: 0, host: '127.0.0.1' });
  const headers = { 'content-type': 'application/json', 'x-service-api-key': KEY };
  const turn = (question: string, projectId?: string) => async () => {
    const res = await fetch(`${origin}/v1/chat`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        agentId: 'agt_bench',
        ...(projectId ? { projectId } : {}),
        messages: [{ role: 'user', parts: [{ type: 'text', text: question }] }],
      }),
    });
    if (res.status !== 200) throw new Error(`atrium answered ${res.status}: ${await res.text()}`);
    const body = (await res.json()) as { sources?: unknown[] };
    if (projectId && !body.sources?.length) throw new Error('the turn got no excerpts');
  };
  const retrieval = (question: string) => async () => {
    await retrieveForTurn(database.db, { id: 'prj_bench', workspace_id: 'wsp_bench' }, question);
  };
  try {
    for (const [kind, question] of Object.entries(QUESTIONS)) {
      const plain = turn(question);
      const withProject = turn(question, 'prj_bench');
      const alone = retrieval(question);
      await timeEach(30, plain);
      await timeEach(30, withProject);
      await timeEach(30, alone);
      const [base, project, retrieved] = await interleavedRounds(
        REQUESTS,
        [plain, withProject, alone],
        () => {
          upstream.requests.length = 0;
        },
      );
      const [b50, p50] = [percentile(base, 50), percentile(project, 50)];
      report(
        `${engine}, ${kind}-word question: turn without a project p50 ${fmt(b50)} p95 ${fmt(percentile(base, 95))}; with the 10,000-chunk project p50 ${fmt(p50)} p95 ${fmt(percentile(project, 95))}; added p50 ${fmt(p50 - b50)} (target ≤ 15 ms); retrieval alone p50 ${fmt(percentile(retrieved, 50))} p95 ${fmt(percentile(retrieved, 95))}`,
      );
    }
  } finally {
    await app.close();
    await upstream.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function run(report: Report) {
  report(loadAverage());
  report(`${REQUESTS} sequential turns each way; questions: ${JSON.stringify(QUESTIONS)}`);
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-bench-turn-db-'));
  const sqlite = await openDatabase({ kind: 'sqlite', file: path.join(dataDir, 'atrium.sqlite') });
  try {
    await migrateToLatest(sqlite.db);
    await measure(report, 'SQLite', sqlite);
  } finally {
    await sqlite.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
  const pgUrl = process.env.BENCH_DATABASE_URL;
  if (!pgUrl) {
    report('PostgreSQL: skipped (set BENCH_DATABASE_URL)');
    return;
  }
  report(loadAverage());
  const schema = `bench_turn_${process.pid}`;
  const postgres = await openDatabase({ kind: 'postgres', url: pgUrl, schema });
  try {
    await migrateToLatest(postgres.db, schema);
    await measure(report, 'PostgreSQL', postgres);
    await postgres.db.schema.dropSchema(schema).cascade().execute();
  } finally {
    await postgres.close();
  }
}
