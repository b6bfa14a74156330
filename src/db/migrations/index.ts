import { CompiledQuery, type Kysely, type Migration, SqliteAdapter } from 'kysely';
import * as initial from './001-initial.js';
import * as chatMessagesAndRunUsage from './002-chat-messages-and-run-usage.js';
import * as sharedLimits from './003-shared-limits.js';
import * as management from './010-management.js';
import * as chatHistory from './003-chat-history.js';
import * as knowledge from './011-knowledge.js';
import * as knowledgeVectors from './012-knowledge-vectors.js';
import * as knowledgeSearchIndex from './014-knowledge-search-index.js';
import * as knowledgeGinPendingLimit from './015-knowledge-gin-pending-limit.js';
import * as changeNotices from './016-change-notices.js';
import * as uploadReservations from './017-upload-reservations.js';
import * as skillReplacements from './018-skill-replacements.js';
import * as knowledgeFoldedSearchText from './019-knowledge-folded-search-text.js';
import * as projectFileObjectTimes from './020-project-file-object-times.js';
import * as knowledgeCjkWords from './021-knowledge-cjk-words.js';
import * as knowledgeCaseFoldedWords from './022-knowledge-case-folded-words.js';
import * as knowledgeScopeFile from './023-knowledge-scope-file.js';
import * as caseFoldedSortKeys from './024-case-folded-sort-keys.js';
import * as uploadReservationsPerUrl from './025-upload-reservations-per-url.js';
import * as subAgentUsageRollup from './026-sub-agent-usage-rollup.js';
import * as knowledgeFtsProjectScope from './027-knowledge-fts-project-scope.js';
import * as codePointListingIds from './028-code-point-listing-ids.js';
import * as knowledgeFtsExactStatistics from './029-knowledge-fts-exact-statistics.js';
import * as agentUnsafeImages from './030-agent-unsafe-images.js';
import * as knowledgeSoutheastAsianWords from './031-knowledge-southeast-asian-words.js';
import * as providerChangeNotices from './032-provider-change-notices.js';
import * as agentRunWarningsAndSources from './033-agent-run-warnings-and-sources.js';
import * as sessionTokenMakers from './034-session-token-makers.js';

/**
 * Every migration, in order. Listed here (not read from a folder) so that the same code runs
 * compiled from dist/ and from source under the test runner. New ones append a line.
 */
export const migrations: Record<string, Migration> = eachInOneTransaction({
  '001-initial': initial,
  '002-chat-messages-and-run-usage': chatMessagesAndRunUsage,
  '003-shared-limits': sharedLimits,
  '010-management': management,
  '003-chat-history': chatHistory,
  '011-knowledge': knowledge,
  '012-knowledge-vectors': knowledgeVectors,
  '014-knowledge-search-index': knowledgeSearchIndex,
  '015-knowledge-gin-pending-limit': knowledgeGinPendingLimit,
  '016-change-notices': changeNotices,
  '017-upload-reservations': uploadReservations,
  '018-skill-replacements': skillReplacements,
  '019-knowledge-folded-search-text': knowledgeFoldedSearchText,
  '020-project-file-object-times': projectFileObjectTimes,
  '021-knowledge-cjk-words': knowledgeCjkWords,
  '022-knowledge-case-folded-words': knowledgeCaseFoldedWords,
  '023-knowledge-scope-file': knowledgeScopeFile,
  '024-case-folded-sort-keys': caseFoldedSortKeys,
  '025-upload-reservations-per-url': uploadReservationsPerUrl,
  '026-sub-agent-usage-rollup': subAgentUsageRollup,
  '027-knowledge-fts-project-scope': knowledgeFtsProjectScope,
  '028-code-point-listing-ids': codePointListingIds,
  '029-knowledge-fts-exact-statistics': knowledgeFtsExactStatistics,
  '030-agent-unsafe-images': agentUnsafeImages,
  '031-knowledge-southeast-asian-words': knowledgeSoutheastAsianWords,
  '032-provider-change-notices': providerChangeNotices,
  '033-agent-run-warnings-and-sources': agentRunWarningsAndSources,
  '034-session-token-makers': sessionTokenMakers,
});

/**
 * On SQLite each migration's up and down runs in one transaction. Kysely's migrator runs
 * SQLite's migrations without one (its adapter claims no transactional DDL, which SQLite has),
 * so a process stopped between two statements (a deploy's kill, a full disk) left a migration
 * half done and not recorded: a table dropped and not made again (019, 027 and 029 remake the
 * FTS5 table), a column added (024), a table renamed (025), and every later start failed on
 * the statement that had run, or search found a part of the chunks until the next start. Now
 * a stop changes nothing, and the next start runs the migration whole. Other connections (a
 * process still on the version before) read the old tables until the commit, and their writes
 * wait for it (their busy timeout) instead of landing in a half-made table (029, which keeps
 * its content, would write their rows a second time: `constraint failed`). PostgreSQL's
 * migrator already runs the pending migrations in one transaction, with their bookkeeping. On
 * SQLite the migrator records a migration only after its commit, so a stop in that moment left
 * it done and unrecorded, and the next start ran it again and failed: each migration's
 * transaction now also notes it in a table of its own (MIGRATIONS_COMMITTED), and an up the
 * migrator runs again for want of its record finds that note and does nothing, so the migrator
 * records it then. A migration opens no transaction of its own: Kysely does not nest them.
 *
 * The transaction takes the write lock as it begins (`begin immediate`), waiting for another
 * process's write up to the busy timeout. A deferred one took it at its first write, and a
 * migration that reads first (021 looks for Chinese and Japanese text before it writes) failed
 * at once with SQLITE_BUSY_SNAPSHOT, and the start with it, when another process had committed
 * a write after that read: SQLite does not wait to upgrade a read transaction.
 */
function eachInOneTransaction(list: Record<string, Migration>): Record<string, Migration> {
  const inOneTransaction =
    (name: string, direction: 'up' | 'down', step: (db: Kysely<unknown>) => Promise<void>) =>
    (db: Kysely<unknown>): Promise<void> =>
      db.getExecutor().adapter instanceof SqliteAdapter
        ? inImmediateTransaction(db, name, direction, step)
        : step(db);
  return Object.fromEntries(
    Object.entries(list).map(([name, { up, down }]) => [
      name,
      { up: inOneTransaction(name, 'up', up), down: down && inOneTransaction(name, 'down', down) },
    ]),
  );
}

/**
 * SQLite: the migrations whose up has committed and whose down has not, noted in their own
 * transaction (the migrator's record comes after it). Rows of the migrations that ran before this
 * table existed are missing, which is harmless: the migrator has their records.
 */
const MIGRATIONS_COMMITTED = 'atrium_migrations_committed';

/**
 * `step` on one connection, between `begin immediate` and `commit` (rolled back if it fails),
 * with its note in MIGRATIONS_COMMITTED; an up already noted is not run again.
 */
function inImmediateTransaction(
  db: Kysely<unknown>,
  name: string,
  direction: 'up' | 'down',
  step: (db: Kysely<unknown>) => Promise<void>,
): Promise<void> {
  // Raw queries: not seen by plugins (a test's that stops a migration at its nth statement).
  const run = (connection: Kysely<unknown>, text: string, parameters: unknown[] = []) =>
    connection.executeQuery(CompiledQuery.raw(text, parameters));
  return db.connection().execute(async (connection) => {
    await run(connection, 'begin immediate');
    try {
      await run(connection, `create table if not exists ${MIGRATIONS_COMMITTED} (name text primary key)`);
      const noted = await run(connection, `select 1 from ${MIGRATIONS_COMMITTED} where name = ?`, [name]);
      if (direction === 'down') {
        await step(connection);
        await run(connection, `delete from ${MIGRATIONS_COMMITTED} where name = ?`, [name]);
      } else if (noted.rows.length === 0) {
        await step(connection);
        await run(connection, `insert into ${MIGRATIONS_COMMITTED} (name) values (?)`, [name]);
      }
      await run(connection, 'commit');
    } catch (error) {
      // SQLite may have rolled back already (a full disk): then there is nothing left to end.
      await run(connection, 'rollback').catch(() => undefined);
      throw error;
    }
  });
}
