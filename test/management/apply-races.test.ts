import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey, keyPrefix } from '../../src/auth/api-keys.js';
import { insertOrganizationKeyIfNameFree } from '../../src/services/api-key-admin.js';
import { applyFixture, createTestApp, engineName } from '../helpers/app.js';
import { keyedCaller, MANAGEMENT_SETUP, MKEYS } from './fixtures.js';

/**
 * `atrium apply` racing API writes on PostgreSQL. Apply is held mid-file by a test transaction
 * that locks the second user's row: by then it has written the first user's row. The API write
 * then comes in, and the test lets apply go on.
 */
let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: MANAGEMENT_SETUP });
});
afterAll(() => t.close());
const call = keyedCaller(() => t.app);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The first session found waiting for a lock one of `pids` holds, other than those in `pids`
 * (PostgreSQL's own account, pg_blocking_pids); undefined once `unless` has settled first.
 * Waited for rather than slept on: on a loaded machine apply could take more than the 300 ms
 * once slept to reach usr_nora's row, and the API's write then came before the apply.
 */
async function sessionWaitingFor(pids: number[], unless: Promise<unknown>): Promise<number | undefined> {
  let settled = false;
  const stop = () => (settled = true);
  unless.then(stop, stop);
  while (!settled) {
    const { rows } = await sql<{ pid: number }>`
      select pid from pg_stat_activity
      where pg_blocking_pids(pid) && ${pids}::int[] and not (pid = any(${pids}::int[]))`.execute(
      t.env.database.db,
    );
    if (rows[0]) return rows[0].pid;
    await sleep(10);
  }
  return undefined;
}

/** Applies `file` while usr_nora's row is locked; `during` runs then, and the lock is let go. */
async function applyHeldAt<T>(file: string, during: () => Promise<T>) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: (pid: number) => void;
  const isLocked = new Promise<number>((resolve) => (locked = resolve));
  const blocker = t.env.database.db.transaction().execute(async (trx) => {
    const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
    await sql`select id from users where id = 'usr_nora' for update`.execute(trx);
    locked(rows[0]!.pid);
    await released;
  });
  const blockerPid = await isLocked;
  const applied = applyFixture(t.env, file).then(
    () => 'ok',
    (error: Error) => `refused: ${error.message}`,
  );
  // Apply has written the first user's row, and waits for usr_nora's.
  const applyPid = await sessionWaitingFor([blockerPid], applied);
  const answer = during();
  // The API's write waits for the apply's rows (or, were it not to wait, has answered).
  await sessionWaitingFor([blockerPid, applyPid ?? blockerPid], answer);
  release();
  await blocker;
  return { applied: await applied, answer: await answer };
}

describe.skipIf(engineName !== 'postgres')(`atrium apply racing API writes (${engineName})`, () => {
  it('a key made for a user whose email the file changes waits for the apply: no deadlock, no 500', async () => {
    const file = MANAGEMENT_SETUP.replace('email: max@acme.test', 'email: max2@acme.test').replace(
      'name: Nora,',
      'name: Nora Two,',
    );
    const { applied, answer } = await applyHeldAt(file, () =>
      call('POST', '/v1/workspace/wsp_main/api-keys', MKEYS.owner, {
        name: 'made-during-apply',
        userId: 'usr_max',
      }),
    );
    expect(applied).toBe('ok');
    expect(answer.statusCode, answer.body).toBe(201);
  });

  it('an agent the API makes while apply runs is not taken over by the file without --adopt', async () => {
    const file = MANAGEMENT_SETUP.replace('name: Nora,', 'name: Nora Three,').replace(
      '          - { id: agt_private, title: Private, visibility: private }',
      '          - { id: agt_private, title: Private, visibility: private }\n          - { title: Raced, visibility: workspace }',
    );
    const { applied, answer } = await applyHeldAt(file, () =>
      call('POST', '/v1/workspace/wsp_main/agents', MKEYS.owner, { title: 'Raced' }),
    );
    expect(applied).toBe('ok');
    // The API's create waited for the file's agent, and found the title taken.
    expect(answer.statusCode, answer.body).toBe(409);
    const raced = await t.db.selectFrom('agents').select('managed_by').where('title', '=', 'Raced').execute();
    expect(raced).toEqual([{ managed_by: 'setup' }]);
  });
  it('an organization key `atrium keys create` makes while apply runs waits for it: one live key of a name', async () => {
    const declared = 'atr_org_mgmt_acme_raced_00000000000000000000';
    const file = MANAGEMENT_SETUP.replace('name: Nora,', 'name: Nora Four,').replace(
      `      - { name: acme-org, user: usr_olivia, key: "${MKEYS.acmeOrg}" }`,
      `      - { name: acme-org, user: usr_olivia, key: "${MKEYS.acmeOrg}" }\n      - { name: raced-org, user: usr_olivia, key: "${declared}" }`,
    );
    expect(file).toContain('raced-org');
    const key = generateApiKey('organization');
    const { applied, answer } = await applyHeldAt(file, () =>
      insertOrganizationKeyIfNameFree(t.env.database.db, {
        id: 'key_raced_org',
        name: 'raced-org',
        kind: 'organization',
        organizationId: 'org_acme',
        workspaceId: null,
        userId: 'usr_olivia',
        keyHash: hashApiKey(key),
        keyPrefix: keyPrefix(key),
        expiresAt: null,
        createdAt: new Date().toISOString(),
        managedBy: 'api',
      }),
    );
    expect(applied).toBe('ok');
    // The command waited for the file's key, and found the name taken.
    expect(answer).toBe(false);
    const live = await t.db
      .selectFrom('api_keys')
      .select('id')
      .where('organization_id', '=', 'org_acme')
      .where('name', '=', 'raced-org')
      .where('revoked_at', 'is', null)
      .execute();
    expect(live).toHaveLength(1);
  });
});
