/**
 * Listing pages kept in memory (src/db/listing-cache.ts, src/db/exact-cache.ts) are exact: a
 * listing never answers what the database would no longer answer, whoever changed it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExactCache } from '../../src/db/exact-cache.js';
import { commitOnOtherConnection, createTestApp, engineName, testDatabaseUrl } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
});
afterAll(() => t.close());

const headers = { 'x-service-api-key': KEYS.mainMember };
async function projectNames(): Promise<string[]> {
  const res = await t.app.inject({ method: 'GET', url: '/v1/projects', headers });
  expect(res.statusCode).toBe(200);
  return (res.json() as { data: { projects: { name: string }[] } }).data.projects.map((p) => p.name);
}

/** A chat of wsp_main's member usr_max, written directly; returns its creation time. */
async function insertChat(id: string, projectId: string | null): Promise<string> {
  const at = new Date().toISOString();
  await t.db
    .insertInto('chats')
    .values({
      id,
      workspace_id: 'wsp_main',
      agent_id: 'agt_zeta',
      project_id: projectId,
      title: id,
      spend_usd: 0,
      client_id: null,
      created_by: 'usr_max',
      end_user: null,
      message_count: 0,
      last_message_at: null,
      created_at: at,
      updated_at: at,
    })
    .execute();
  return at;
}

describe(`listing pages kept in memory (${engineName})`, () => {
  it('shows a change made through the API on the next listing', async () => {
    expect(await projectNames()).toEqual(['Docs']);
    const created = await t.app.inject({
      method: 'POST',
      url: '/v1/projects',
      headers,
      payload: { name: 'Fresh' },
    });
    expect(created.statusCode).toBe(201);
    expect(await projectNames()).toEqual(['Fresh', 'Docs']);
    const id = (created.json() as { data: { project: { id: string } } }).data.project.id;
    await t.db.deleteFrom('projects').where('id', '=', id).execute();
    expect(await projectNames()).toEqual(['Docs']);
  });

  it('shows a change committed by another connection (another process, the CLI) on the next listing', async () => {
    expect(await projectNames()).toEqual(['Docs']);
    const rename = (name: string) =>
      commitOnOtherConnection(t.env, (db) =>
        db.updateTable('projects').set({ name }).where('id', '=', 'prj_docs').execute(),
      );
    await rename('Docs, renamed');
    try {
      expect(await projectNames()).toEqual(['Docs, renamed']);
    } finally {
      await rename('Docs');
    }
    expect(await projectNames()).toEqual(['Docs']);
  });

  it('shows a change made inside a transaction once it commits', async () => {
    expect(await projectNames()).toEqual(['Docs']);
    await t.db.transaction().execute(async (trx) => {
      await trx.updateTable('projects').set({ name: 'Docs (tx)' }).where('id', '=', 'prj_docs').execute();
    });
    expect(await projectNames()).toEqual(['Docs (tx)']);
    await t.db.updateTable('projects').set({ name: 'Docs' }).where('id', '=', 'prj_docs').execute();
    expect(await projectNames()).toEqual(['Docs']);
  });

  it('shows what a delete cascades into (a chat whose project is deleted loses its projectId)', async () => {
    await insertChat('cht_cascade', 'prj_2019');
    const projectOfChat = async () => {
      const res = await t.app.inject({ method: 'GET', url: '/v1/chats', headers });
      const chats = (res.json() as { data: { chats: { id: string; projectId: string | null }[] } }).data
        .chats;
      return chats.find((chat) => chat.id === 'cht_cascade')?.projectId;
    };
    expect(await projectOfChat()).toBe('prj_2019');
    await t.db.deleteFrom('projects').where('id', '=', 'prj_2019').execute();
    expect(await projectOfChat()).toBeNull();
  });

  it("shows a chat's new and changed messages on the next read of its messages, whoever wrote them", async () => {
    const at = await insertChat('cht_messages', null);
    const message = (id: string, position: number, text: string) => ({
      id,
      chat_id: 'cht_messages',
      workspace_id: 'wsp_main',
      role: 'user' as const,
      parts: JSON.stringify([{ type: 'text', text }]),
      position,
      input_tokens: 0,
      output_tokens: 0,
      cost_usd: 0,
      created_at: at,
    });
    const texts = async () => {
      const res = await t.app.inject({ method: 'GET', url: '/v1/chats/cht_messages/messages', headers });
      expect(res.statusCode).toBe(200);
      const { messages } = (res.json() as { data: { messages: { parts: { text: string }[] }[] } }).data;
      return messages.map((m) => m.parts[0]!.text);
    };
    await t.db
      .insertInto('messages')
      .values(message('m1', 0, 'one'))
      .execute();
    expect(await texts()).toEqual(['one']);
    expect(await texts()).toEqual(['one']);
    await commitOnOtherConnection(t.env, (db) =>
      db
        .insertInto('messages')
        .values(message('m2', 1, 'two'))
        .execute(),
    );
    expect(await texts()).toEqual(['one', 'two']);
    await t.db
      .updateTable('messages')
      .set({ parts: JSON.stringify([{ type: 'text', text: 'two, edited' }]) })
      .where('id', '=', 'm2')
      .execute();
    expect(await texts()).toEqual(['one', 'two, edited']);
    await t.db.deleteFrom('chats').where('id', '=', 'cht_messages').execute();
    const gone = await t.app.inject({ method: 'GET', url: '/v1/chats/cht_messages/messages', headers });
    expect(gone.statusCode).toBe(404);
  });
});

describe.skipIf(testDatabaseUrl)(`exact cache (${engineName})`, () => {
  it('does not keep a value read while a write to its tables was reported', async () => {
    const cache = ExactCache.for<string>(t.db, ['projects'], { entries: 10 })!;
    let loads = 0;
    const stale = await cache.get('k', async () => {
      loads++;
      // A write reported while this read was under way: what was read may be older than it.
      await t.db.updateTable('projects').set({ icon: 'folder' }).where('id', '=', 'none').execute();
      return 'read before the write';
    });
    expect(stale).toBe('read before the write');
    expect(await cache.get('k', async () => (loads++, 'read again'))).toBe('read again');
    expect(await cache.get('k', async () => (loads++, 'not read'))).toBe('read again');
    expect(loads).toBe(2);
  });

  it('answers as of a version read earlier in the request, and reads again once another connection committed', async () => {
    const cache = ExactCache.for<string>(t.db, ['projects'], { entries: 10 })!;
    const atAuthentication = await cache.readVersion();
    expect(await cache.get('k', async () => 'first', atAuthentication)).toBe('first');
    expect(await cache.get('k', async () => 'not read', atAuthentication)).toBe('first');
    const { description } = await t.db
      .selectFrom('projects')
      .select('description')
      .where('id', '=', 'prj_docs')
      .executeTakeFirstOrThrow();
    await commitOnOtherConnection(t.env, async (db) => {
      await db.updateTable('projects').set({ description: 'changed' }).where('id', '=', 'prj_docs').execute();
      await db.updateTable('projects').set({ description }).where('id', '=', 'prj_docs').execute();
    });
    // A request that started before that commit is answered as of its start...
    expect(await cache.get('k', async () => 'not read', atAuthentication)).toBe('first');
    // ...and the next request, reading the version anew, sees the commit.
    const next = await cache.readVersion();
    expect(next).not.toBe(atAuthentication);
    expect(await cache.get('k', async () => 'after the commit', next)).toBe('after the commit');
    // A slow request still holding the old version empties the cache rather than reading stale.
    expect(await cache.get('k', async () => 'read again', atAuthentication)).toBe('read again');
    expect(await cache.get('k', async () => 'read anew', next)).toBe('read anew');
  });

  it('keeps values within its weight and drops one heavier than all of it', async () => {
    const cache = ExactCache.for<string>(t.db, ['projects'], {
      entries: 10,
      weight: 10,
      weigh: (value) => (value as string).length,
    })!;
    await cache.get('big', async () => 'x'.repeat(11));
    expect(await cache.get('big', async () => 'again')).toBe('again');
    expect(await cache.get('big', async () => 'not read')).toBe('again');
  });
});

describe.runIf(testDatabaseUrl)(`exact cache (${engineName})`, () => {
  it('is not used on PostgreSQL, where it could not stay exact', () => {
    expect(ExactCache.for(t.db, ['projects'], { entries: 10 })).toBeUndefined();
  });
});
