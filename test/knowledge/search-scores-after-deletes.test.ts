import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../src/db/database.js';
import { migrations } from '../../src/db/migrations/index.js';
import { systemClock } from '../../src/ids.js';
import { searchProject } from '../../src/knowledge/search.js';
import { rebuildProjectIndex } from '../../src/services/knowledge.js';
import { deleteProjectFile, projectStoragePrefix } from '../../src/services/project-files.js';
import { createTestApp, engineName, migrateTestDatabaseTo } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { textFile, type TestFile } from './files.js';
import { indexPending, putAndSync, type TestApp } from './helpers.js';

/**
 * docs/knowledge.md, "Search": bm25 on SQLite weighs words over the whole FTS5 table, whose
 * totals must follow deletes. A project reached through much churn (files deleted, replaced,
 * rebuilt) scores as a fresh one holding only the same files; PostgreSQL's ts_rank_cd has no
 * such totals and is checked alike.
 */
const WS = 'wsp_main';
const PROJECT = 'prj_docs';
const QUERY = 'zebra orchard';

/** The files left in the end: one holds the rare word, two the less rare one. */
const KEPT: TestFile[] = [
  textFile('kept/zebra.txt', 'A zebra grazes in the orchard, by the apple trees.'),
  textFile('kept/orchard.txt', 'The orchard has apple trees in rows, the old orchard pear trees.'),
  textFile('kept/cider.txt', 'Cider is pressed from each apple of the orchard.'),
  textFile('kept/pie.txt', 'An apple pie needs butter and flour.'),
  textFile('kept/juice.txt', 'Apple juice is best served cold.'),
  textFile('kept/jam.txt', 'Apple jam keeps for a year in the cellar.'),
];
/** Files indexed, then deleted or replaced, before the search. */
const CHURNED = Array.from({ length: 30 }, (_, i) =>
  textFile(`old/note-${i}.txt`, `Note ${i}: an apple a day, picked from tree number ${i}.`),
);

let churned: TestApp;
let fresh: TestApp;

beforeAll(async () => {
  churned = await createTestApp({ setup: TENANCY_SETUP });
  fresh = await createTestApp({ setup: TENANCY_SETUP });

  // The same files reached by churn: indexed among many others that were deleted, replaced
  // (their chunks deleted and written again), then rebuilt.
  await putAndSync(
    churned,
    WS,
    PROJECT,
    KEPT.map((file) => textFile(file.path, 'placeholder')),
  );
  await indexAndDeleteChurned(churned);
  await putAndSync(churned, WS, PROJECT, KEPT);
  await rebuildProjectIndex(churned.env.database.db, WS, PROJECT);
  await indexAll(churned);

  await putAndSync(fresh, WS, PROJECT, KEPT);
  await indexAll(fresh);
}, 120_000);
afterAll(async () => {
  await churned?.close();
  await fresh?.close();
});

/** Indexes what is pending, then stops that indexer. */
async function indexAll(t: TestApp) {
  const stop = await indexPending(t);
  await stop();
}

/**
 * Indexes the CHURNED files (and any pending), then deletes them: half as the API's delete does,
 * half by a sync after they left storage.
 */
async function indexAndDeleteChurned(t: TestApp) {
  await putAndSync(t, WS, PROJECT, CHURNED);
  await indexAll(t);
  const db = t.env.database.db;
  const files = await db
    .selectFrom('project_files')
    .select(['id', 'path'])
    .where('path', 'like', 'old/%')
    .execute();
  for (const [n, file] of files.entries()) {
    if (n % 2 === 0)
      await deleteProjectFile({ db, store: t.store, clock: systemClock }, WS, PROJECT, file.id);
    else await t.store.delete(projectStoragePrefix(WS, PROJECT) + file.path);
  }
  await putAndSync(t, WS, PROJECT, []);
  expect(
    await db.selectFrom('project_files').select('path').where('path', 'like', 'old/%').execute(),
  ).toEqual([]);
}

/** Each found file's score (ties on PostgreSQL's cover density are ordered by chunk id). */
const scores = async (t: TestApp) =>
  Object.fromEntries(
    (
      await searchProject(t.env.database.db, { workspaceId: WS, projectId: PROJECT, query: QUERY, limit: 10 })
    ).map((hit) => [hit.path, hit.score]),
  );

/** docs/knowledge.md, "Search": a word's weight follows the chunks indexed now. */
describe(`search scores after deletes (${engineName})`, () => {
  it('are those of an index that only ever held the remaining chunks', async () => {
    const expected = await scores(fresh);
    expect(Object.keys(expected).sort()).toEqual(['kept/cider.txt', 'kept/orchard.txt', 'kept/zebra.txt']);
    if (engineName === 'sqlite') {
      // bm25 weighs the rare word most: the scores compared are not all alike.
      expect(expected['kept/zebra.txt']).toBeGreaterThan(expected['kept/orchard.txt']! * 1.5);
    }
    const actual = await scores(churned);
    expectScores(actual, expected);
  });
});

function expectScores(actual: Record<string, number>, expected: Record<string, number>) {
  expect(Object.keys(actual).sort()).toEqual(Object.keys(expected).sort());
  for (const [path, score] of Object.entries(actual)) expect(score, path).toBeCloseTo(expected[path]!, 6);
}

/** How SQLite's FTS5 table is made (028: contentless; 029: keeping its own content). */
const ftsDefinition = async (t: TestApp = churned) =>
  (
    await sql<{ definition: string }>`select sql as definition from sqlite_master
      where name = 'knowledge_chunks_fts'`.execute(t.env.database.db)
  ).rows[0]?.definition;

describe(`migrating a churned search index (${engineName})`, () => {
  it('counts only the chunks there (029), and back down to 028 as before', async () => {
    const sqlite = engineName === 'sqlite';
    await migrateTestDatabaseTo(churned.env, '028-code-point-listing-ids');
    if (sqlite) expect(await ftsDefinition()).toContain('contentless_delete=1');
    await indexAndDeleteChurned(churned);
    const expected = await scores(fresh);
    // 028's table still counts the deleted chunks: the rare word weighs more than it should.
    if (sqlite)
      expect((await scores(churned))['kept/zebra.txt']).toBeGreaterThan(expected['kept/zebra.txt']! * 2);
    else expectScores(await scores(churned), expected);

    await migrateToLatest(churned.env.database.db, churned.env.database.schema);
    if (sqlite) expect(await ftsDefinition()).not.toContain('content=');
    expectScores(await scores(churned), expected);
    // And the trigger still takes deleted chunks out.
    await indexAndDeleteChurned(churned);
    expectScores(await scores(churned), expected);

    await migrateTestDatabaseTo(churned.env, '028-code-point-listing-ids');
    if (sqlite) expect(await ftsDefinition()).toContain('contentless_delete=1');
    expectScores(await scores(churned), expected);
    await migrateToLatest(churned.env.database.db, churned.env.database.schema);
    expectScores(await scores(churned), expected);
  });
});

/** `db` with every statement whose text holds `text` failing, as a process killed there would stop. */
const interruptedAt = (db: Kysely<unknown>, text: string) =>
  db.withPlugin({
    transformQuery({ node }) {
      if (JSON.stringify(node).includes(text)) throw new Error(`interrupted at ${text}`);
      return node;
    },
    transformResult: async ({ result }) => result,
  });

/** A migration's up as the migrator runs it (src/db/migrations/index.ts). */
const upOf = (name: string) => migrations[name]!.up;
const up029 = upOf('029-knowledge-fts-exact-statistics');

describe(`an interrupted migration 029 (${engineName})`, () => {
  it.skipIf(engineName !== 'sqlite')(
    'changes nothing, so search still works and the next start migrates',
    async () => {
      const db = fresh.env.database.db as unknown as Kysely<unknown>;
      await migrateTestDatabaseTo(fresh.env, '028-code-point-listing-ids');
      const expected = await scores(fresh);
      // Stopped after the old table was dropped, before the new one was made.
      await expect(up029(interruptedAt(db, 'create virtual table knowledge_chunks_fts'))).rejects.toThrow(
        'interrupted',
      );
      expect(await ftsDefinition(fresh)).toContain('contentless_delete=1');
      expectScores(await scores(fresh), expected);
      // Stopped while the chunks were written again.
      await expect(up029(interruptedAt(db, 'insert into knowledge_chunks_fts'))).rejects.toThrow(
        'interrupted',
      );
      expect(await ftsDefinition(fresh)).toContain('contentless_delete=1');
      expectScores(await scores(fresh), expected);

      await migrateToLatest(fresh.env.database.db, fresh.env.database.schema);
      expect(await ftsDefinition(fresh)).not.toContain('content=');
      expectScores(await scores(fresh), expected);
    },
  );
});

/** The chunks whose FTS5 row holds `word`, whichever version of the table is there. */
const chunksMatching = async (t: TestApp, word: string) =>
  (
    await sql<{ id: number }>`select rowid as id from knowledge_chunks_fts
      where knowledge_chunks_fts match ${word} order by rowid`.execute(t.env.database.db)
  ).rows.map((row) => row.id);

/** 019 and 027 made the FTS5 table again and wrote every chunk into it, as 029 does. */
describe.each([
  ['019-knowledge-folded-search-text', '018-skill-replacements'],
  ['027-knowledge-fts-project-scope', '026-sub-agent-usage-rollup'],
])(`an interrupted migration %s (${engineName})`, (name, previous) => {
  it.skipIf(engineName !== 'sqlite')(
    'changes nothing, so the table keeps its rows and the next start migrates',
    async () => {
      const db = fresh.env.database.db as unknown as Kysely<unknown>;
      await migrateToLatest(fresh.env.database.db, fresh.env.database.schema);
      const expected = await scores(fresh);
      await migrateTestDatabaseTo(fresh.env, previous);
      const definition = await ftsDefinition(fresh);
      const apples = await chunksMatching(fresh, 'apple');
      expect(apples.length).toBeGreaterThan(3);
      // Stopped after the old table was dropped, before the new one was made; then while the
      // chunks were written again.
      for (const step of ['create virtual table knowledge_chunks_fts', 'insert into knowledge_chunks_fts']) {
        await expect(upOf(name)(interruptedAt(db, step)), step).rejects.toThrow('interrupted');
        expect(await ftsDefinition(fresh), step).toBe(definition);
        expect(await chunksMatching(fresh, 'apple'), step).toEqual(apples);
      }

      await migrateToLatest(fresh.env.database.db, fresh.env.database.schema);
      expect(await ftsDefinition(fresh)).not.toContain('content=');
      expectScores(await scores(fresh), expected);
    },
  );
});
