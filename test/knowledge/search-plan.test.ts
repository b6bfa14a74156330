import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type RawBuilder, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { type DatabaseHandle, migrateToLatest, openDatabase } from '../../src/db/database.js';
import { sqliteProjectMatch, sqliteRankedMatches, sqliteTermCount } from '../../src/knowledge/search.js';

// The plan SQLite picks, whatever TEST_DATABASE_URL says: these queries are SQLite's own.
const dir = mkdtempSync(path.join(tmpdir(), 'atrium-search-plan-'));
let database: DatabaseHandle;
beforeAll(async () => {
  database = await openDatabase(loadConfig({ ATRIUM_DATA_DIR: dir }).database);
  await migrateToLatest(database.db);
});
afterAll(async () => {
  await database.close();
  rmSync(dir, { recursive: true, force: true });
});

async function plan(query: RawBuilder<unknown>): Promise<string[]> {
  const result = await sql<{ detail: string }>`explain query plan ${query}`.execute(database.db);
  return result.rows.map((row) => row.detail).filter((detail) => /^(SCAN|SEARCH) /.test(detail));
}

describe('SQLite search query plans', () => {
  it('the ranked matches read the full-text index first, then each match by id', async () => {
    // With a chunk id range the planner walked the project's chunks and ran the MATCH once per
    // chunk (400 ms a search at 10,000 chunks, bench/knowledge-turn.bench.ts).
    const steps = await plan(sqliteRankedMatches('prj_a', sqliteProjectMatch('prj_a', '"word" OR "other"')));
    expect(steps[0]).toMatch(/^SCAN knowledge_chunks_fts VIRTUAL TABLE/);
    expect(steps[1]).toBe('SEARCH s USING INTEGER PRIMARY KEY (rowid=?)');
  });

  it('the term count reads the full-text index alone', async () => {
    const steps = await plan(sqliteTermCount('prj_a', 'word', 2_001));
    expect(steps.filter((step) => !step.startsWith('SCAN (subquery'))).toEqual([
      expect.stringMatching(/^SCAN knowledge_chunks_fts VIRTUAL TABLE/),
    ]);
  });
});
