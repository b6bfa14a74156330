import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Kysely, type Migration, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseHandle, migrateTo, migrateToLatest, openDatabase } from '../../src/db/database.js';
import { migrations } from '../../src/db/migrations/index.js';
import { engineName } from '../helpers/app.js';

/**
 * docs/operations.md, "Crashes" (migration at start): Kysely's migrator runs SQLite's
 * migrations without a transaction, so each migration runs in its own. A process stopped at any
 * statement of one (a deploy's kill, a full disk) leaves the database as it was, and the next
 * start runs it whole. Here every migration, from an empty database, is stopped at each of its
 * statements in turn, up and then down. (The FTS5 migrations' data, with chunks to write again,
 * is checked in test/knowledge/search-scores-after-deletes.) PostgreSQL's migrator runs them in
 * its own transaction.
 */
let root: string;
let database: DatabaseHandle;
beforeAll(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'atrium-test-'));
  database = await openDatabase({ kind: 'sqlite', file: path.join(root, 'atrium.sqlite') });
});
afterAll(async () => {
  await database?.close();
  rmSync(root, { recursive: true, force: true });
});

/** `db` whose `n`th statement from now fails, as a process killed before it would stop there. */
function stoppedAtStatement(db: Kysely<unknown>, n: number): Kysely<unknown> {
  let seen = 0;
  return db.withPlugin({
    transformQuery({ node }) {
      if (++seen === n) throw new Error(`stopped at statement ${n}`);
      return node;
    },
    transformResult: async ({ result }) => result,
  });
}

/** Every table, index, trigger and view as SQLite keeps it (the FTS5 tables' own ones too). */
const schemaOf = async (db: Kysely<unknown>) =>
  (await sql`select type, name, tbl_name, sql from sqlite_master order by type, name`.execute(db)).rows;

/** Runs `step` stopped at its 1st statement, its 2nd, … until it runs whole; each stop changed nothing. */
async function stopAtEachStatement(
  db: Kysely<unknown>,
  step: (db: Kysely<unknown>) => Promise<void>,
  label: string,
): Promise<number> {
  const before = await schemaOf(db);
  for (let n = 1; ; n++) {
    const stopped = await step(stoppedAtStatement(db, n)).then(
      () => false,
      (error: Error) => {
        expect(error.message, label).toBe(`stopped at statement ${n}`);
        return true;
      },
    );
    if (!stopped) return n - 1;
    expect(await schemaOf(db), `${label} stopped at statement ${n}`).toEqual(before);
  }
}

describe(`a migration stopped part way (${engineName})`, () => {
  it.skipIf(engineName !== 'sqlite')(
    'leaves the database as it was, up or down, and the next start runs it whole',
    async () => {
      const db = database.db as unknown as Kysely<unknown>;
      let statements = 0;
      // In the migrator's order: by name.
      for (const name of Object.keys(migrations).sort()) {
        const migration = migrations[name] as Required<Migration>;
        statements += await stopAtEachStatement(db, migration.up, `${name} up`);
        statements += await stopAtEachStatement(db, migration.down, `${name} down`);
        // Run whole by the migrator, as the next start does.
        await migrateTo(database.db, undefined, name);
      }
      // Not a loop over migrations that do nothing on SQLite.
      expect(statements).toBeGreaterThan(100);
    },
    120_000,
  );
});

describe(`a migration stopped after its commit, before the migrator's record (${engineName})`, () => {
  it.skipIf(engineName !== 'sqlite')(
    'is recorded by the next start, not run again (024 adds columns: run twice, it failed)',
    async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'atrium-test-'));
      const fresh = await openDatabase({ kind: 'sqlite', file: path.join(dir, 'atrium.sqlite') });
      try {
        await migrateTo(fresh.db, undefined, '023-knowledge-scope-file');
        // The migrator's record of 024, the statement after 024's own commit, never lands.
        const recordStopped = fresh.db.withPlugin({
          transformQuery({ node }) {
            const into = (node as { into?: { table?: { identifier?: { name?: string } } } }).into;
            if (node.kind === 'InsertQueryNode' && into?.table?.identifier?.name === 'kysely_migration') {
              throw new Error('stopped before the record');
            }
            return node;
          },
          transformResult: async ({ result }) => result,
        });
        await expect(migrateTo(recordStopped, undefined, '024-case-folded-sort-keys')).rejects.toThrow(
          'stopped before the record',
        );
        expect(await migrateToLatest(fresh.db)).toContain('024-case-folded-sort-keys');
        const recorded = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(
          fresh.db,
        );
        expect(recorded.rows.map((row) => row.name)).toEqual(Object.keys(migrations).sort());
      } finally {
        await fresh.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
