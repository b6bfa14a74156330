import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/errors.js';
import { type Reservation, UsageReservations } from '../../src/services/usage-reservations.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { waitUntil } from '../helpers/wait-until.js';

const SETUP = `
organizations:
  - id: org_rx
    name: Reservation expiry
    users: [{ id: usr_rx, name: R, email: r@expiry.test }]
    workspaces:
      - id: wsp_rx
        name: R
        limits: { monthlyTokens: 1000 }
        members: [{ user: usr_rx, role: owner }]
`;

describe(`usage reservations of a process that dies (${engineName})`, () => {
  let env: TestEnv;
  let at: number;
  const clock = () => new Date(at);
  const processes: UsageReservations[] = [];
  const reservations: Reservation[] = [];

  /** A serving process on the test's database and clock. */
  function process(options?: { ttlMs: number }): UsageReservations {
    const reservationsOfProcess = new UsageReservations(env.database.db, clock, options);
    processes.push(reservationsOfProcess);
    return reservationsOfProcess;
  }

  /** A request of 1,000 tokens at most: the whole monthly limit, so the next one is refused. */
  async function admit(reservationsOfProcess: UsageReservations): Promise<Reservation | ApiError> {
    const workspace = await env.database.db
      .selectFrom('workspaces')
      .select(['id', 'monthly_tokens', 'monthly_cost_usd', 'chat_spend_cap_usd'])
      .where('id', '=', 'wsp_rx')
      .executeTakeFirstOrThrow();
    try {
      const reservation = await reservationsOfProcess.admit({
        workspace,
        chatId: undefined,
        estimate: () => ({ tokens: 1_000, costUsd: 0 }),
      });
      reservations.push(reservation!);
      return reservation!;
    } catch (error) {
      if (error instanceof ApiError) return error;
      throw error;
    }
  }

  const expiresAt = async () =>
    (await env.database.db.selectFrom('usage_reservations').select('expires_at').executeTakeFirstOrThrow())
      .expires_at;

  beforeEach(async () => {
    at = Date.parse('2026-12-01T10:00:00.000Z');
    env = await createTestEnv();
    await applyFixture(env, SETUP);
  });

  afterEach(async () => {
    await Promise.all(reservations.splice(0).map((reservation) => reservation.release()));
    await Promise.all(processes.splice(0).map((reservationsOfProcess) => reservationsOfProcess.stop()));
    await env.close();
  });

  it("stops counting a killed process's reservation after 30 s, not 5 minutes", async () => {
    // It never renews nor releases: the process is gone.
    expect(await admit(process())).not.toBeInstanceOf(ApiError);
    expect(await expiresAt()).toBe(new Date(at + 30_000).toISOString());

    const other = process();
    at += 29_000;
    expect(await admit(other)).toMatchObject({ code: 'usage_limit_exceeded', status: 402 });
    at += 2_000;
    expect(await admit(other)).not.toBeInstanceOf(ApiError);
  });

  it('keeps counting a live process reservation however long its request runs', async () => {
    const owner = process({ ttlMs: 300 });
    owner.start();
    expect(await admit(owner)).not.toBeInstanceOf(ApiError);
    expect(await expiresAt()).toBe(new Date(at + 300).toISOString());

    // The request has run longer than the expiry: the owner's renewal moves it on.
    at += 1_000;
    const renewed = new Date(at + 300).toISOString();
    await waitUntil(async () => (await expiresAt()) === renewed, 'the reservation renewed');
    expect(await admit(process({ ttlMs: 300 }))).toMatchObject({ code: 'usage_limit_exceeded' });
  });

  it('puts back a reservation cleared away while its process stalled past the expiry', async () => {
    const owner = process({ ttlMs: 300 });
    owner.start();
    expect(await admit(owner)).not.toBeInstanceOf(ApiError);
    // Another process's admission found it expired (the owner's renewals did not run) and
    // cleared it away: its request still runs.
    at += 1_000;
    await env.database.db.deleteFrom('usage_reservations').execute();

    const renewed = new Date(at + 300).toISOString();
    await waitUntil(
      async () =>
        (await env.database.db.selectFrom('usage_reservations').select('expires_at').execute()).some(
          (row) => row.expires_at === renewed,
        ),
      'the reservation put back',
    );
    expect(await admit(process({ ttlMs: 300 }))).toMatchObject({ code: 'usage_limit_exceeded' });
    // A released one is not put back.
    await Promise.all(reservations.splice(0).map((reservation) => reservation.release()));
    at += 1_000;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await env.database.db.selectFrom('usage_reservations').selectAll().execute()).toEqual([]);
  });
});
