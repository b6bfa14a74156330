/**
 * The authenticated-key cache (src/auth/key-cache.ts) is exact: it answers from memory only while
 * nothing a key's access is read from has changed, in this process or in another connection.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { apiKeyCache } from '../../src/auth/key-cache.js';
import { hashApiKey } from '../../src/auth/api-keys.js';
import { findApiKeyByHash } from '../../src/db/repositories/api-keys.js';
import { commitOnOtherConnection, createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
});
afterAll(() => t.close());

describe(`authenticated-key cache (${engineName})`, () => {
  // On PostgreSQL the process answers from memory once it holds its lease (pg-change-signals.ts).
  beforeAll(async () => {
    const cache = apiKeyCache(t.db)!;
    await vi.waitFor(async () => expect(await cache.readVersion()).toBeGreaterThan(0), { timeout: 5000 });
  });
  const hash = hashApiKey(KEYS.mainMember);
  let loads = 0;
  const load = () => {
    loads++;
    return findApiKeyByHash(t.db, hash);
  };

  it('reads a key once, then answers from memory while nothing changes', async () => {
    const cache = apiKeyCache(t.db)!;
    loads = 0;
    await cache.get(hash, load);
    await cache.get(hash, load);
    // Writes to tables a key's access does not depend on keep the cache.
    await t.db.updateTable('projects').set({ icon: 'x' }).where('id', '=', 'none').execute();
    expect(await cache.get(hash, load)).toMatchObject({ workspace_role: 'member' });
    expect(loads).toBe(1);
  });

  it('reads again after this process writes to a key, a workspace, a membership, a user or an organization', async () => {
    const cache = apiKeyCache(t.db)!;
    const writes = [
      () => t.db.updateTable('api_keys').set({ name: 'renamed' }).where('id', '=', 'none').execute(),
      () => t.db.updateTable('workspaces').set({ name: 'renamed' }).where('id', '=', 'none').execute(),
      () => t.db.deleteFrom('workspace_members').where('user_id', '=', 'none').execute(),
      () => t.db.deleteFrom('users').where('id', '=', 'none').execute(),
      () => t.db.deleteFrom('organizations').where('id', '=', 'none').execute(),
      () =>
        t.db.transaction().execute((trx) => trx.deleteFrom('api_keys').where('id', '=', 'none').execute()),
    ];
    for (const write of writes) {
      await cache.get(hash, load);
      loads = 0;
      await write();
      await cache.get(hash, load);
      expect(loads).toBe(1);
    }
  });

  it('reads again after another connection commits (another process, the CLI)', async () => {
    const cache = apiKeyCache(t.db)!;
    await cache.get(hash, load);
    const setRole = (role: 'admin' | 'member') =>
      commitOnOtherConnection(t.env, (db) =>
        db
          .updateTable('workspace_members')
          .set({ role })
          .where('user_id', '=', 'usr_max')
          .where('workspace_id', '=', 'wsp_main')
          .execute(),
      );
    await setRole('admin');
    try {
      loads = 0;
      expect(await cache.get(hash, load)).toMatchObject({ workspace_role: 'admin' });
      expect(loads).toBe(1);
    } finally {
      await setRole('member');
    }
  });

  it('refuses a key on the very next request once it is revoked by another connection', async () => {
    const headers = { 'x-service-api-key': KEYS.mainMember };
    expect((await t.app.inject({ method: 'GET', url: '/v1/me', headers })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: '/v1/me', headers })).statusCode).toBe(200);
    await commitOnOtherConnection(t.env, (db) =>
      db
        .updateTable('api_keys')
        .set({ revoked_at: new Date().toISOString() })
        .where('key_hash', '=', hash)
        .execute(),
    );
    expect((await t.app.inject({ method: 'GET', url: '/v1/me', headers })).statusCode).toBe(401);
  });
});
