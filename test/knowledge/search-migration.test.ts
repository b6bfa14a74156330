import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../src/db/database.js';
import { sqliteProjectToken } from '../../src/db/repositories/knowledge.js';
import { queryTerms, searchProject } from '../../src/knowledge/search.js';
import { createTestApp, engineName, migrateTestDatabaseTo } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { textFile } from './files.js';
import { indexPending, putAndSync, type TestApp } from './helpers.js';

/**
 * An index written before 019-knowledge-folded-search-text, then migrated: what was indexed
 * already is searched as newly indexed files are. Going back down to 018 restores its index.
 */
let t: TestApp;

beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
  await putAndSync(t, 'wsp_main', 'prj_docs', [
    textFile('ko.txt', '데이터베이스 백업은 매일 새벽 세시에 실행됩니다.'),
    textFile('ligature.txt', 'The ﬁrewall rules are reviewed every quarter.'),
    textFile('zh.txt', '本项目的发布日期是明天。'),
    textFile('el.txt', 'Ο οδηγός εγκατάστασης εξηγεί τα βήματα.'),
    textFile('th.txt', 'ภาษาไทยเป็นภาษาที่สวยงาม'),
  ]);
  const stopIndexer = await indexPending(t);
  await stopIndexer();
}, 90_000);
afterAll(() => t.close());

const migrateTo = (name: string) => migrateTestDatabaseTo(t.env, name);
const found = async (query: string) =>
  (await searchProject(t.env.database.db, { projectId: 'prj_docs', query, limit: 10 })).map((r) => r.path);
/**
 * What an index older than 026 (SQLite: no `scope` column yet, which search needs) finds for
 * one word: the FTS5 table asked directly there, for the words search makes of it; search itself on PostgreSQL.
 */
const foundBefore026 = async (word: string) => {
  if (t.env.database.dialect !== 'sqlite') return found(word);
  const { rows } = await sql<{ path: string }>`select f.path from knowledge_chunks_fts
    join knowledge_chunks c on c.id = knowledge_chunks_fts.rowid
    join project_files f on f.id = c.file_id
    where knowledge_chunks_fts match ${queryTerms(word)
      .map((term) => `"${term}"`)
      .join(' OR ')}`.execute(t.env.database.db);
  return [...new Set(rows.map((row) => row.path))];
};

describe(`migrating an existing search index (${engineName})`, () => {
  it('indexes the chunks already there with their folded words, and back down to 018 as before', async () => {
    await migrateTo('018-skill-replacements');
    const sqlite = t.env.database.dialect === 'sqlite';
    // 018's SQLite index held the raw text, which the folded query words never matched.
    expect(await foundBefore026('백업은')).toEqual(sqlite ? [] : ['ko.txt']);
    expect(await foundBefore026('firewall')).toEqual(sqlite ? [] : ['ligature.txt']);
    await migrateToLatest(t.env.database.db, t.env.database.schema);
    expect(await found('백업은')).toEqual(['ko.txt']);
    expect(await found('firewall')).toEqual(['ligature.txt']);
    expect(await found('quarter')).toEqual(['ligature.txt']);
  });
});

/** The chunks of one file, to write their index as an older version did. */
const chunksOf = (path: string) =>
  t.env.database.db
    .selectFrom('knowledge_chunks')
    .innerJoin('project_files', 'project_files.id', 'knowledge_chunks.file_id')
    .select(['knowledge_chunks.id', 'knowledge_chunks.text'])
    .where('project_files.path', '=', path)
    .execute();

/** Searchable words as 019–021 made them: folded, neither split into words nor lower-cased. */
const foldedOnly = (text: string) =>
  text
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .replace(/[^\p{L}\p{N}]+/gu, ' ');

/**
 * Rewrites a file's index as code before a split migration wrote it: each chunk's text folded but
 * not split into words. `sqliteScope`: the FTS table has the `scope` column (027 and after).
 */
async function indexUnsplit(path: string, sqliteScope?: string) {
  const db = t.env.database.db;
  for (const chunk of await chunksOf(path)) {
    const words = foldedOnly(chunk.text);
    if (t.env.database.dialect === 'sqlite') {
      await sql`delete from knowledge_chunks_fts where rowid = ${chunk.id}`.execute(db);
      await (
        sqliteScope === undefined
          ? sql`insert into knowledge_chunks_fts (rowid, heading, text) values (${chunk.id}, '', ${words})`
          : sql`insert into knowledge_chunks_fts (rowid, heading, text, scope)
            values (${chunk.id}, '', ${words}, ${sqliteScope})`
      ).execute(db);
    } else {
      await sql`update knowledge_chunks set tsv = to_tsvector('simple', ${words}) where id = ${chunk.id}`.execute(
        db,
      );
    }
  }
}

describe(`migrating Chinese and Japanese chunks indexed unsplit (${engineName})`, () => {
  it('splits their words (021), so a word inside a sentence is found', async () => {
    await migrateTo('020-project-file-object-times');
    await indexUnsplit('zh.txt');
    expect(await foundBefore026('发布日期')).toEqual([]);
    await migrateToLatest(t.env.database.db, t.env.database.schema);
    expect(await found('发布日期')).toEqual(['zh.txt']);
    expect(await found('firewall')).toEqual(['ligature.txt']);
  });
});

describe(`migrating words PostgreSQL lower-cased itself (${engineName})`, () => {
  it('writes them again as queries are (022), so a Greek word ending in ς is found', async () => {
    await migrateTo('021-knowledge-cjk-words');
    const db = t.env.database.db;
    if (t.env.database.dialect === 'postgres') {
      // The index as it was written before: folded, lower-cased by PostgreSQL (which keeps ς).
      for (const chunk of await chunksOf('el.txt')) {
        await sql`update knowledge_chunks set tsv = to_tsvector('simple', ${foldedOnly(chunk.text)}) where id = ${chunk.id}`.execute(
          db,
        );
      }
      expect(await foundBefore026('εγκατάστασης')).toEqual([]);
    }
    await migrateToLatest(db, t.env.database.schema);
    expect(await found('εγκατάστασης')).toEqual(['el.txt']);
    expect(await found('ΟΔΗΓΟΣ')).toEqual(['el.txt']);
    expect(await found('发布日期')).toEqual(['zh.txt']);
  });
});

describe(`migrating Thai, Lao, Khmer and Burmese chunks indexed unsplit (${engineName})`, () => {
  it('splits their words (031), so a word inside a sentence is found', async () => {
    await migrateTo('030-agent-unsafe-images');
    await indexUnsplit('th.txt', sqliteProjectToken('prj_docs'));
    expect(await found('สวยงาม')).toEqual([]);
    await migrateToLatest(t.env.database.db, t.env.database.schema);
    expect(await found('สวยงาม')).toEqual(['th.txt']);
    expect(await found('ภาษาไทยเป็นภาษาที่สวยงาม')).toEqual(['th.txt']);
    expect(await found('发布日期')).toEqual(['zh.txt']);
    expect(await found('firewall')).toEqual(['ligature.txt']);
  });
});
