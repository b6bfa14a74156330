/**
 * Listing pages kept in memory (src/db/listing-cache.ts, src/db/exact-cache.ts) are exact: a
 * listing never answers what the database would no longer answer, whoever changed it.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ExactCache } from '../../src/db/exact-cache.js';
import { PgChangeSignals } from '../../src/db/pg-change-signals.js';
import { registerChangeSignals } from '../../src/db/change-signals.js';
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

/** A cache of t.db in use: on PostgreSQL once this process holds its lease (before, nothing is kept). */
async function cacheInUse() {
  const cache = ExactCache.for<string>(t.db, ['projects'], { entries: 10 })!;
  if (testDatabaseUrl) {
    await vi.waitFor(async () => expect(await cache.readVersion()).toBeGreaterThan(0), { timeout: 5000 });
  }
  return cache;
}

describe(`exact cache, either engine (${engineName})`, () => {
  it('does not keep a value read while a write to its tables was under way', async () => {
    const cache = await cacheInUse();
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
});

describe.skipIf(testDatabaseUrl)(`exact cache (${engineName})`, () => {
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
  it('keeps values while its lease holds; a commit by another process is seen once that commit returns', async () => {
    const cache = await cacheInUse();
    expect(await cache.get('k', async () => 'first')).toBe('first');
    expect(await cache.get('k', async () => 'not read')).toBe('first');
    // Another connection with signals of its own: another process, or `atrium keys revoke`.
    await commitOnOtherConnection(t.env, (db) =>
      db.updateTable('projects').set({ icon: 'folder' }).where('id', '=', 'none').execute(),
    );
    expect(await cache.get('k', async () => 'after the commit')).toBe('after the commit');
    // A write to a table the cache does not read leaves it alone.
    await commitOnOtherConnection(t.env, (db) =>
      db.updateTable('skills').set({ description: 'x' }).where('id', '=', 'none').execute(),
    );
    expect(await cache.get('k', async () => 'not read')).toBe('after the commit');
  });

  it('has a writer return only once another process has seen its change, however late its notices arrive', async () => {
    await cacheInUse();
    const { url, schema } = t.env.config.database as { url: string; schema: string };
    // Another process whose notices reach it 300 ms late.
    class LateNotices extends pg.Client {
      override emit(event: string | symbol, ...args: unknown[]): boolean {
        if (event !== 'notification') return super.emit(event, ...args);
        setTimeout(() => super.emit(event, ...args), 300);
        return true;
      }
    }
    const late = new PgChangeSignals(
      { connectionString: url, options: `-c search_path=${schema}` },
      LateNotices,
    );
    try {
      const cache = await cacheOfAnotherProcess(late);
      const started = performance.now();
      await t.db.updateTable('projects').set({ icon: 'folder' }).where('id', '=', 'none').execute();
      // Confirmed by the late process (300 ms), not waited out until its lease ended (2 s).
      expect(performance.now() - started).toBeLessThan(1800);
      expect(await cache.get('k', async () => 'after the write')).toBe('after the write');
    } finally {
      await late.close();
    }
  });

  /**
   * A cache of another process with `signals`, holding its lease and a value read before a
   * write: the caller writes, then reads the cache again.
   */
  async function cacheOfAnotherProcess(signals: PgChangeSignals) {
    const otherProcess = {};
    registerChangeSignals(otherProcess as never, signals);
    const cache = ExactCache.for<string>(otherProcess as never, ['projects'], { entries: 10 })!;
    await vi.waitFor(async () => expect(await cache.readVersion()).toBeGreaterThan(0), { timeout: 5000 });
    expect(await cache.get('k', async () => 'first')).toBe('first');
    expect(await cache.get('k', async () => 'not read')).toBe('first');
    return cache;
  }

  /** A pg client on the test's schema, outside Kysely. */
  async function withPlainClient<T>(use: (client: pg.Client) => Promise<T>): Promise<T> {
    const { url, schema } = t.env.config.database as { url: string; schema: string };
    const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
    await client.connect();
    try {
      return await use(client);
    } finally {
      await client.end();
    }
  }

  it('has a writer wait out the lease of a process that does not confirm, at most a lease', async () => {
    await cacheInUse();
    const write = () =>
      t.db.updateTable('projects').set({ icon: 'folder' }).where('id', '=', 'none').execute();
    // Written past Kysely, whose writer would itself wait for the silent process.
    const peers = (text: string) => withPlainClient((client) => client.query(text));
    // Far longer than a lease can be: a writer never waits more than one lease (2 s).
    await peers(`insert into cache_peers values ('prc_silent', now() + interval '6000 milliseconds')`);
    try {
      const started = performance.now();
      await write();
      const waited = performance.now() - started;
      expect(waited).toBeGreaterThan(1500);
      expect(waited).toBeLessThan(4500);
      await vi.waitFor(
        async () => {
          const { rows } = await peers(
            `select 1 from cache_peers where process_id = 'prc_silent' and lease_until > now()`,
          );
          expect(rows).toHaveLength(0);
        },
        { timeout: 10_000 },
      );
      const again = performance.now();
      await write();
      expect(performance.now() - again).toBeLessThan(1000);
    } finally {
      await peers(`delete from cache_peers where process_id = 'prc_silent'`);
    }
  });

  it('keeps nothing, and has no writer wait, where notices do not come back (a transaction pooler)', async () => {
    await cacheInUse();
    const { url, schema } = t.env.config.database as { url: string; schema: string };
    class DroppedNotices extends pg.Client {
      override emit(event: string | symbol, ...args: unknown[]): boolean {
        return event === 'notification' ? true : super.emit(event, ...args);
      }
    }
    const deaf = new PgChangeSignals(
      { connectionString: url, options: `-c search_path=${schema}` },
      DroppedNotices,
    );
    try {
      for (let i = 0; i < 6; i++) {
        expect(await deaf.externalVersion()).toBeLessThan(0);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      const started = performance.now();
      await t.db.updateTable('projects').set({ icon: 'folder' }).where('id', '=', 'none').execute();
      // Not the 2 s a lease would make it wait.
      expect(performance.now() - started).toBeLessThan(1500);
    } finally {
      await deaf.close();
    }
  });

  it("stays exact when the first schema of a process's search path is an empty one, its tables further along", async () => {
    await cacheInUse();
    const { url, schema } = t.env.config.database as { url: string; schema: string };
    // As with PostgreSQL's default path ("$user", public) for a role that has a schema of its own
    // and tables migrated into public by another role: current_schema() is the empty schema.
    const empty = `${schema}_own`;
    await withPlainClient((client) => client.query(`create schema if not exists "${empty}"`));
    const elsewhere = new PgChangeSignals({
      connectionString: url,
      options: `-c search_path=${empty},${schema}`,
    });
    try {
      const cache = await cacheOfAnotherProcess(elsewhere);
      const started = performance.now();
      await t.db.updateTable('projects').set({ icon: 'folder' }).where('id', '=', 'none').execute();
      const waited = performance.now() - started;
      expect(await cache.get('k', async () => 'after the write')).toBe('after the write');
      // Confirmed by the other process, not waited out until its lease ended (2 s).
      expect(waited).toBeLessThan(1500);
    } finally {
      await elsewhere.close();
      await withPlainClient((client) => client.query(`drop schema if exists "${empty}"`));
    }
  });

  it('keeps nothing in a schema without the change triggers', async () => {
    const { url, schema } = t.env.config.database as { url: string; schema: string };
    const bare = `${schema}_bare`;
    await withPlainClient((client) =>
      client.query(`create schema if not exists "${bare}";
        create table if not exists "${bare}".cache_peers (process_id text primary key, lease_until timestamptz not null)`),
    );
    const signals = new PgChangeSignals({ connectionString: url, options: `-c search_path=${bare}` });
    try {
      for (let i = 0; i < 6; i++) {
        expect(await signals.externalVersion()).toBeLessThan(0);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      const { rows } = await withPlainClient((client) => client.query(`select 1 from "${bare}".cache_peers`));
      expect(rows).toHaveLength(0);
    } finally {
      await signals.close();
      await withPlainClient((client) => client.query(`drop schema if exists "${bare}" cascade`));
    }
  });

  it('keeps nothing without a lease (its listening connection cannot connect)', async () => {
    const signals = new PgChangeSignals({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
    try {
      const versions = [await signals.externalVersion(), await signals.externalVersion()];
      await new Promise((resolve) => setTimeout(resolve, 200));
      versions.push(await signals.externalVersion());
      expect(new Set(versions).size).toBe(3);
      for (const version of versions) expect(version).toBeLessThan(0);
    } finally {
      await signals.close();
    }
  });
});
