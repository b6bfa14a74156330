/**
 * Every table an exact cache reads from (src/db/exact-cache.ts) must tell each process of its
 * changes. On SQLite PRAGMA data_version covers every table; on PostgreSQL only the tables with
 * the `atrium_changes` trigger notify (migration 016 and later ones). A cached table without
 * it (`providers` until migration 032) left every other process answering from memory what the
 * database no longer held.
 */
import { sql } from 'kysely';
import pg from 'pg';
import { beforeEach, describe, expect, it } from 'vitest';
import { tablesReadByCaches } from '../../src/db/exact-cache.js';
import { postChat, UPSTREAM_KEY, useChatApp, userText } from '../chat/fixtures.js';
import { commitOnOtherConnection, engineName, type TestApp } from '../helpers/app.js';
import type { FakeUpstream } from '../helpers/fake-upstream.js';

let upstream: FakeUpstream;
let t: TestApp;

useChatApp((app) => ({ upstream, t } = app));
beforeEach(() => {
  upstream.requests.length = 0;
});

/** The tables of the test's schema that have the change trigger (none on SQLite). */
async function tablesWithTrigger(): Promise<Set<string>> {
  const { url, schema } = t.env.config.database as { url: string; schema: string };
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ table: string }>(
      `select c.relname as table from pg_trigger t join pg_class c on c.oid = t.tgrelid
         join pg_namespace n on n.oid = c.relnamespace
       where t.tgname = 'atrium_changes' and n.nspname = $1`,
      [schema],
    );
    return new Set(rows.map((row) => row.table));
  } finally {
    await client.end();
  }
}

/** The bearer token the fake provider got on a reply of agt_helper (its model: fake-small on `fake`). */
async function providerKeyOfAReply(): Promise<string | undefined> {
  const res = await postChat(t, { agentId: 'agt_helper', messages: [userText('hi')] });
  expect(res.statusCode).toBe(200);
  return upstream.lastRequest().headers.authorization as string | undefined;
}

const rotateProviderKey = (apiKey: string) =>
  commitOnOtherConnection(t.env, (db) =>
    db.updateTable('providers').set({ api_key: apiKey }).where('id', '=', 'fake').execute(),
  );

describe(`the tables exact caches read from (${engineName})`, () => {
  it('are known, the provider a reply reads among them', () => {
    // Those of the key, the reply's lookups and the six listings.
    for (const table of ['api_keys', 'users', 'agents', 'models', 'providers', 'projects', 'messages']) {
      expect(tablesReadByCaches()).toContain(table);
    }
  });

  it.runIf(engineName === 'postgres')('each have the change trigger on PostgreSQL', async () => {
    const triggered = await tablesWithTrigger();
    expect([...tablesReadByCaches()].filter((table) => !triggered.has(table))).toEqual([]);
  });

  // Last: `providers` loses its trigger on PostgreSQL (as before migration 032), as a database
  // whose trigger was dropped, or a cache on a table a migration forgot. Only the trigger: the
  // app runs against this schema, so taking the database back to before 032 would take later
  // migrations' columns away from it too.
  it('are read from the database, not from memory, while one of them tells no change', async () => {
    // Through the app's own connection, as a migration would run: a schema change it cannot
    // read the tables of makes the process read again which tables notify.
    if (engineName === 'postgres')
      await sql`drop trigger atrium_changes on providers`.execute(t.env.database.db);
    expect(await providerKeyOfAReply()).toBe(`Bearer ${UPSTREAM_KEY}`);
    await rotateProviderKey('rotated-without-trigger');
    expect(await providerKeyOfAReply()).toBe('Bearer rotated-without-trigger');
    await rotateProviderKey(UPSTREAM_KEY);
    expect(await providerKeyOfAReply()).toBe(`Bearer ${UPSTREAM_KEY}`);
  });
});
