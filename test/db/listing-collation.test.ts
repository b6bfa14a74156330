import { sql } from 'kysely';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseHandle, migrateToLatest, openDatabase } from '../../src/db/database.js';
import { insertAgentRun, listAgentRuns } from '../../src/db/repositories/agent-runs.js';
import { listListedAgents } from '../../src/db/repositories/agents.js';
import { listProjectFilesByPath } from '../../src/db/repositories/knowledge-turns.js';
import { insertApiKey, listWorkspaceApiKeys } from '../../src/db/repositories/api-keys.js';
import { type ChatPosition, insertChat, listChatsJson } from '../../src/db/repositories/chats.js';
import {
  insertProjectFilesIfAbsent,
  listProjectFileRows,
  listProjectFilesJson,
} from '../../src/db/repositories/project-files.js';
import { listProjectsJson } from '../../src/db/repositories/projects.js';
import { workspaceModels } from '../../src/db/repositories/usage-report.js';
import { parseSetupText } from '../../src/setup/validate.js';
import { applySetup } from '../../src/setup/apply.js';
import { createTestEnv, type TestEnv, testDatabaseUrl } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';

/**
 * docs/api.md: listings are ordered the same whatever the database's locale. The suite's
 * PostgreSQL database has the `C.UTF-8` locale, which orders like code points anyway; on
 * PostgreSQL this file makes a database with a language's collation (ICU `en`, where `x_aaaa`
 * comes before `x_BBBB`, and `x_BBBB` before `x_cccc`). On SQLite, which compares text byte by
 * byte, it runs the same checks on the suite's usual database. Rows of one listing share their
 * sort key (the same time, the same name), so only the tie-breaking id orders them.
 */
const SETUP = TENANCY_SETUP.replace(
  '          - { id: agt_other, title: Other agent, visibility: workspace }',
  [
    '          - { id: agt_other, title: Other agent, visibility: workspace }',
    '          - { id: agt_aaaa, title: twin, visibility: workspace }',
    '          - { id: agt_BBBB, title: Twin, visibility: workspace }',
  ].join('\n'),
).replace(
  '          - { id: prj_other, name: Other project }',
  [
    '          - { id: prj_other, name: Other project }',
    '          - { id: prj_aaaa, name: Twin }',
    '          - { id: prj_BBBB, name: Twin }',
  ].join('\n'),
);

/** Ids that sort `…BBBB`, `…aaaa`, `…cccc` descending in code point order (`c` > `a` > `B`). */
const TWINS = ['aaaa', 'BBBB', 'cccc'];
/** What a listing of newest first gives for rows of one time: ids in code point order, descending. */
const DESCENDING = ['cccc', 'aaaa', 'BBBB'];
const AT = '2026-01-02T03:04:05.000Z';

const name = `atrium_icu_${randomBytes(4).toString('hex')}`;
let admin: pg.Client | undefined;
let sqliteEnv: TestEnv | undefined;
let database: DatabaseHandle;

describe('listings on a database with a language collation', () => {
  beforeAll(async () => {
    if (testDatabaseUrl) {
      admin = new pg.Client({ connectionString: testDatabaseUrl });
      await admin.connect();
      await admin.query(
        `create database ${name} template template0 locale_provider icu icu_locale 'en' locale 'C.UTF-8'`,
      );
      const url = new URL(testDatabaseUrl);
      url.pathname = `/${name}`;
      database = await openDatabase({ kind: 'postgres', url: url.toString() });
      await migrateToLatest(database.db, database.schema);
    } else {
      sqliteEnv = await createTestEnv();
      database = sqliteEnv.database;
    }
    const parsed = parseSetupText(SETUP, 'fixture.yaml');
    if (!parsed.ok) throw new Error('bad fixture');
    await applySetup(database.db, parsed.setup, { now: new Date() });
  });
  afterAll(async () => {
    if (sqliteEnv) return sqliteEnv.close();
    await database?.close();
    await admin?.query(`drop database if exists ${name}`);
    await admin?.end();
  });

  it('breaks ties of one case-folded title by id in code point order, as SQLite does', async () => {
    const { rows } = await listListedAgents(database.db, 'wsp_other', 100, 0);
    expect(rows.map((row) => row.id)).toEqual(['agt_other', 'agt_BBBB', 'agt_aaaa']);
  });

  it('lists projects updated at one time by id in code point order', async () => {
    // The setup file wrote the three projects at one time.
    const projects = JSON.parse(await listProjectsJson(database.db, 'wsp_other')) as Array<{ id: string }>;
    expect(projects.map((project) => project.id)).toEqual(['prj_other', 'prj_aaaa', 'prj_BBBB']);
  });

  it.skipIf(!testDatabaseUrl)(
    'keeps ids in code point order in the project list index, which then serves it',
    async () => {
      const { rows } = await sql<{ definition: string }>`select indexdef as definition from pg_indexes
      where indexname = 'projects_listing_idx' and schemaname = current_schema()`.execute(database.db);
      expect(rows[0]?.definition).toMatch(/\(workspace_id, archived, updated_at, id COLLATE "C"\)$/);
    },
  );

  it('pages chats updated at one time by id in code point order, none skipped or repeated', async () => {
    for (const twin of TWINS) {
      await insertChat(database.db, {
        id: `cht_${twin}`,
        workspace_id: 'wsp_other',
        agent_id: 'agt_other',
        project_id: null,
        title: twin,
        spend_usd: 0,
        client_id: null,
        created_by: null,
        end_user: null,
        message_count: 0,
        last_message_at: null,
        created_at: AT,
        updated_at: AT,
      });
    }
    const query = { workspaceId: 'wsp_other', limit: 1 };
    const whole = await listChatsJson(database.db, { ...query, limit: 10 });
    expect(whole.keys.map((key) => key.id)).toEqual(DESCENDING.map((twin) => `cht_${twin}`));
    const paged: string[] = [];
    let after: ChatPosition | undefined;
    for (let page = 0; page < TWINS.length + 1; page++) {
      const { keys } = await listChatsJson(database.db, { ...query, after });
      if (keys.length === 0) break;
      paged.push(keys[0]!.id);
      after = keys[0];
    }
    expect(paged).toEqual(DESCENDING.map((twin) => `cht_${twin}`));
  });

  /** One markdown file a twin, all updated at one time, in a project of wsp_other. */
  const insertTwinFiles = (idPrefix: string, projectId: string) =>
    insertProjectFilesIfAbsent(
      database.db,
      TWINS.map((twin) => ({
        id: `${idPrefix}${twin}`,
        workspace_id: 'wsp_other',
        project_id: projectId,
        name: `${twin}.md`,
        path: `${twin}.md`,
        mime_type: 'text/markdown',
        size_bytes: 1,
        etag: twin,
        type: 'file' as const,
        created_at: AT,
        updated_at: AT,
        synced_at: AT,
      })),
    );

  it('lists and pages files updated at one time by id in code point order', async () => {
    await insertTwinFiles('fil_', 'prj_other');
    const expected = DESCENDING.map((twin) => `fil_${twin}`);
    const rows = await listProjectFileRows(database.db, 'wsp_other', 'prj_other');
    expect(rows.map((row) => row.id)).toEqual(expected);
    const paged: string[] = [];
    for (let offset = 0; offset < TWINS.length; offset++) {
      const found = await listProjectFilesJson(database.db, 'wsp_other', 'prj_other', { limit: 1, offset });
      paged.push(...(JSON.parse(found!.page) as Array<{ id: string }>).map((file) => file.id));
    }
    expect(paged).toEqual(expected);
  });

  it("lists a project's files by path in code point order, as a turn names them", async () => {
    await insertTwinFiles('fil_path_', 'prj_aaaa');
    // A turn lists the first files by path: which ones depends on the order.
    const listed = await listProjectFilesByPath(
      database.db,
      { workspaceId: 'wsp_other', projectId: 'prj_aaaa' },
      2,
    );
    expect(listed.map((file) => file.path)).toEqual(['BBBB.md', 'aaaa.md']);
  });

  it('pages runs made at one time by id in code point order, none skipped or repeated', async () => {
    for (const twin of TWINS) {
      await insertAgentRun(database.db, {
        id: `run_${twin}`,
        workspace_id: 'wsp_other',
        agent_id: 'agt_other',
        chat_id: null,
        status: 'completed',
        input: 'hi',
        response: 'hello',
        error: null,
        execution_time_ms: 1,
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: 0,
        created_at: AT,
        completed_at: AT,
      });
    }
    const whole = await listAgentRuns(database.db, 'wsp_other', 'agt_other', { limit: 10 });
    expect(whole.map((run) => run.id)).toEqual(DESCENDING.map((twin) => `run_${twin}`));
    const paged: string[] = [];
    let after: { createdAt: string; id: string } | undefined;
    for (let page = 0; page < TWINS.length + 1; page++) {
      const [run] = await listAgentRuns(database.db, 'wsp_other', 'agt_other', { limit: 1, after });
      if (!run) break;
      paged.push(run.id);
      after = { createdAt: run.created_at, id: run.id };
    }
    expect(paged).toEqual(DESCENDING.map((twin) => `run_${twin}`));
  });

  it('lists keys made at one time by id in code point order', async () => {
    for (const twin of TWINS) {
      await insertApiKey(database.db, {
        id: `key_${twin}`,
        name: twin,
        kind: 'workspace',
        managedBy: 'api',
        organizationId: 'org_acme',
        workspaceId: 'wsp_other',
        userId: 'usr_olivia',
        keyHash: `hash-${twin}`,
        keyPrefix: twin,
        expiresAt: null,
        createdAt: AT,
      });
    }
    const keys = await listWorkspaceApiKeys(database.db, 'wsp_other');
    expect(keys.filter((key) => key.created_at === AT).map((key) => key.id)).toEqual(
      DESCENDING.map((twin) => `key_${twin}`),
    );
  });

  it("lists a workspace's models by id in code point order", async () => {
    await database.db
      .insertInto('workspace_models')
      .values(TWINS.map((twin) => ({ workspace_id: 'wsp_other', model_id: `x/${twin}` })))
      .execute();
    const models = await workspaceModels(database.db, 'wsp_other');
    expect(models.map((model) => model.id)).toEqual(['x/BBBB', 'x/aaaa', 'x/cccc']);
  });
});
