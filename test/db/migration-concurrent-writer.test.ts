import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type DatabaseHandle, migrateTo, openDatabase } from '../../src/db/database.js';
import { migrations } from '../../src/db/migrations/index.js';
import { engineName } from '../helpers/app.js';

/**
 * docs/operations.md, "Crashes" (migration at start): on SQLite each migration runs in one
 * transaction, while another process (one still on the version before, or one starting beside
 * it) keeps writing to the file. A migration that reads before its first write (021 looks for
 * Chinese and Japanese text before it writes those chunks' words again) must wait for the other
 * writer, as its statements did before they shared a transaction, not fail at once with
 * SQLITE_BUSY_SNAPSHOT because the other process committed after its first read.
 */
let root: string;
let file: string;
let database: DatabaseHandle;
let other: SQLite.Database;
beforeAll(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'atrium-test-'));
  file = path.join(root, 'atrium.sqlite');
  database = await openDatabase({ kind: 'sqlite', file });
  other = new SQLite(file);
  // Not waiting: in this one thread a wait would hold the migration too. Another process waits
  // (its busy timeout) until the migration commits.
  other.pragma('busy_timeout = 0');
});
afterAll(async () => {
  other?.close();
  await database?.close();
  rmSync(root, { recursive: true, force: true });
});

it.skipIf(engineName !== 'sqlite')(
  'a migration that reads first waits for another connection’s write instead of failing',
  async () => {
    await migrateTo(database.db, undefined, '020-project-file-object-times');
    other.pragma('foreign_keys = OFF');
    other
      .prepare(
        `insert into knowledge_chunks (workspace_id, project_id, file_id, ordinal, text, start_offset, end_offset)
         values ('w', 'p', 'f', 0, '東京都の天気', 0, 6)`,
      )
      .run();
    let wrote = false;
    let refused: string | undefined;
    // Another process writes right after the migration's first read.
    const withWriterAfterFirstRead = (database.db as unknown as Kysely<unknown>).withPlugin({
      transformQuery: ({ node }) => node,
      transformResult: async ({ result }) => {
        if (!wrote) {
          wrote = true;
          try {
            other
              .prepare(`insert into rate_limit_counters (key, window_start, count) values ('k', 0, 1)`)
              .run();
          } catch (error) {
            refused = (error as { code?: string }).code;
          }
        }
        return result;
      },
    });
    await expect(
      migrations['021-knowledge-cjk-words']!.up(withWriterAfterFirstRead),
    ).resolves.toBeUndefined();
    expect(wrote).toBe(true);
    // The migration held the write lock from its start: the other write waits for its commit.
    expect(refused).toBe('SQLITE_BUSY');
  },
);
