import { afterAll, beforeAll, expect, it } from 'vitest';
import { applyFixture, createTestApp, engineName } from '../helpers/app.js';
import { keyedCaller, MANAGEMENT_SETUP, MKEYS } from './fixtures.js';

/**
 * A user the setup file no longer lists among a workspace's members leaves it: their workspace
 * key and session tokens stop working on the next request (once the membership stayed forever:
 * no route removes a member, and apply only added them).
 */
let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: MANAGEMENT_SETUP });
});
afterAll(() => t.close());
const call = keyedCaller(() => t.app);

it(`removes a member the file no longer lists; their key and session token stop working (${engineName})`, async () => {
  const token = await call('POST', '/v1/workspace/wsp_main/session-tokens', MKEYS.owner, {
    userId: 'usr_max',
    expiresInSeconds: 600,
  });
  expect(token.statusCode).toBe(201);
  const session = token.json().data.token as string;
  for (const key of [MKEYS.member, session]) expect((await call('GET', '/v1/me', key)).statusCode).toBe(200);

  const without = MANAGEMENT_SETUP.replace('          - { user: usr_max, role: member }\n', '').replace(
    / {10}- \{ id: key_main_member[^\n]*\n/,
    '',
  );
  expect(without).not.toEqual(MANAGEMENT_SETUP);
  const report = await applyFixture(t.env, without);
  expect(report.updated).toContain('member usr_max left Main');

  for (const key of [MKEYS.member, session]) {
    const res = await call('GET', '/v1/me', key);
    expect(res.statusCode).toBe(401);
    expect(res.json().code).toBe('not_authenticated');
  }
  // The others are unaffected; applying the same file again changes nothing.
  expect((await call('GET', '/v1/me', MKEYS.admin)).statusCode).toBe(200);
  expect((await applyFixture(t.env, without)).updated).toEqual([]);
});
