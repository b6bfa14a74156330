import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseHandle, migrateToLatest, openDatabase } from '../../src/db/database.js';
import { listListedAgents } from '../../src/db/repositories/agents.js';
import { parseSetupText } from '../../src/setup/validate.js';
import { applySetup } from '../../src/setup/apply.js';
import { testDatabaseUrl } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';

/**
 * docs/api.md: the agent list is ordered the same whatever the database's locale. The suite's
 * database has the `C.UTF-8` locale, which orders like code points anyway; this file makes a
 * database with a language's collation (ICU `en`, where `agt_aaaa` comes before `agt_BBBB`).
 */
const SETUP = TENANCY_SETUP.replace(
  '          - { id: agt_other, title: Other agent, visibility: workspace }',
  [
    '          - { id: agt_other, title: Other agent, visibility: workspace }',
    '          - { id: agt_aaaa, title: twin, visibility: workspace }',
    '          - { id: agt_BBBB, title: Twin, visibility: workspace }',
  ].join('\n'),
);

const name = `atrium_icu_${randomBytes(4).toString('hex')}`;
let admin: pg.Client;
let database: DatabaseHandle;

describe.skipIf(!testDatabaseUrl)('the agent list on a database with a language collation', () => {
  beforeAll(async () => {
    admin = new pg.Client({ connectionString: testDatabaseUrl });
    await admin.connect();
    await admin.query(
      `create database ${name} template template0 locale_provider icu icu_locale 'en' locale 'C.UTF-8'`,
    );
    const url = new URL(testDatabaseUrl!);
    url.pathname = `/${name}`;
    database = await openDatabase({ kind: 'postgres', url: url.toString() });
    await migrateToLatest(database.db, database.schema);
    const parsed = parseSetupText(SETUP, 'fixture.yaml');
    if (!parsed.ok) throw new Error('bad fixture');
    await applySetup(database.db, parsed.setup, { now: new Date() });
  });
  afterAll(async () => {
    await database?.close();
    await admin.query(`drop database if exists ${name}`);
    await admin.end();
  });

  it('breaks ties of one case-folded title by id in code point order, as SQLite does', async () => {
    const { rows } = await listListedAgents(database.db, 'wsp_other', 100, 0);
    expect(rows.map((row) => row.id)).toEqual(['agt_other', 'agt_BBBB', 'agt_aaaa']);
  });
});
