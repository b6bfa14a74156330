import { beforeEach, describe, expect, it } from 'vitest';
import { findMonthUsage } from '../../src/db/repositories/usage.js';
import { ledgerMonth } from '../../src/services/usage.js';
import { RESERVED_OUTPUT_TOKENS } from '../../src/services/usage-reservations.js';
import { engineName, type TestApp } from '../helpers/app.js';
import { type FakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, useChatApp, userText } from '../chat/fixtures.js';

const CONCURRENT = 40;
let upstream: FakeUpstream;
let t: TestApp;

useChatApp((app) => ({ upstream, t } = app));
beforeEach(async () => {
  upstream.requests.length = 0;
  await t.db.deleteFrom('usage_ledger').execute();
  await t.db.deleteFrom('usage_reservations').execute();
});

function chat(key: string, payload: Record<string, unknown>) {
  return t.app.inject({ method: 'POST', url: '/v1/chat', headers: { 'x-service-api-key': key }, payload });
}

async function assistantUsage(chatIds: string[]) {
  const rows = await t.db
    .selectFrom('messages')
    .select(['input_tokens', 'output_tokens', 'cost_usd'])
    .where('role', '=', 'assistant')
    .where('chat_id', 'in', chatIds)
    .execute();
  return rows.map((r) => ({ tokens: r.input_tokens + r.output_tokens, cost: r.cost_usd }));
}

describe(`usage limits under concurrency (${engineName})`, () => {
  it(`monthlyTokens 100: ${CONCURRENT} concurrent requests pass it by at most one request's tokens`, async () => {
    const responses = await Promise.all(
      Array.from({ length: CONCURRENT }, (_, i) =>
        chat(CHAT_KEYS.limited, { agentId: 'agt_limited', messages: [userText(`question number ${i}`)] }),
      ),
    );
    const ok = responses.filter((r) => r.statusCode === 200);
    const refused = responses.filter((r) => r.statusCode === 402);
    expect(ok.length + refused.length).toBe(CONCURRENT);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    for (const res of refused) expect(res.json().code).toBe('usage_limit_exceeded');
    // Requests refused while others were in flight say so.
    expect(refused.some((r) => r.json().details.reservedTokens > 0)).toBe(true);

    const used = await findMonthUsage(t.db, 'wsp_limited', ledgerMonth(new Date()));
    const perRequest = await assistantUsage(ok.map((r) => r.json().chatId as string));
    const largest = Math.max(...perRequest.map((u) => u.tokens));
    expect(used.inputTokens + used.outputTokens).toBeLessThanOrEqual(100 + largest);
    // Only what the model was really asked counts; every reservation is released.
    expect(upstream.requests).toHaveLength(ok.length);
    expect(await t.db.selectFrom('usage_reservations').selectAll().execute()).toEqual([]);

    // Sequential requests go on until the limit is reached, then 402 without a reservation.
    for (let i = 0; i < 20; i++) {
      const res = await chat(CHAT_KEYS.limited, {
        agentId: 'agt_limited',
        messages: [userText(`more ${i}`)],
      });
      if (res.statusCode === 402) break;
    }
    const finalUsed = await findMonthUsage(t.db, 'wsp_limited', ledgerMonth(new Date()));
    expect(finalUsed.inputTokens + finalUsed.outputTokens).toBeGreaterThanOrEqual(100);
    expect(finalUsed.inputTokens + finalUsed.outputTokens).toBeLessThanOrEqual(100 + largest + 20);
  });

  it(`chatSpendCapUsd: ${CONCURRENT} concurrent turns on one chat pass the cap by at most one turn's cost`, async () => {
    const first = await chat(CHAT_KEYS.capped, { agentId: 'agt_capped', messages: [userText('start')] });
    expect(first.statusCode).toBe(200);
    const chatId = first.json().chatId as string;
    const responses = await Promise.all(
      Array.from({ length: CONCURRENT }, (_, i) =>
        chat(CHAT_KEYS.capped, { agentId: 'agt_capped', chatId, messages: [userText(`turn ${i}`)] }),
      ),
    );
    const refused = responses.filter((r) => r.statusCode === 402);
    for (const res of refused) expect(res.json().code).toBe('spend_cap_exceeded');
    const spend = await t.db
      .selectFrom('chats')
      .select('spend_usd')
      .where('id', '=', chatId)
      .executeTakeFirstOrThrow();
    const largest = Math.max(...(await assistantUsage([chatId])).map((u) => u.cost));
    expect(spend.spend_usd).toBeLessThanOrEqual(0.001 + largest);
    expect(await t.db.selectFrom('usage_reservations').selectAll().execute()).toEqual([]);
  });

  it('counts a live reservation of another process, and ignores an expired one (a process that died)', async () => {
    const now = Date.now();
    await t.db
      .insertInto('usage_reservations')
      .values({
        id: 'rsv_dead',
        workspace_id: 'wsp_limited',
        chat_id: null,
        process_id: 'prc_dead',
        tokens: 1_000_000,
        cost_usd: 100,
        created_at: new Date(now - 600_000).toISOString(),
        expires_at: new Date(now - 1_000).toISOString(),
      })
      .execute();
    const admitted = await chat(CHAT_KEYS.limited, { agentId: 'agt_limited', messages: [userText('hello')] });
    expect(admitted.statusCode).toBe(200);
    // The expired reservation was cleared on the way.
    expect(await t.db.selectFrom('usage_reservations').select('id').execute()).toEqual([]);

    await t.db.deleteFrom('usage_ledger').execute();
    await t.db
      .insertInto('usage_reservations')
      .values({
        id: 'rsv_live',
        workspace_id: 'wsp_limited',
        chat_id: null,
        process_id: 'prc_other',
        tokens: 100,
        cost_usd: 0,
        created_at: new Date(now).toISOString(),
        expires_at: new Date(now + 60_000).toISOString(),
      })
      .execute();
    const chatsBefore = await t.db.selectFrom('chats').select('id').execute();
    const refused = await chat(CHAT_KEYS.limited, {
      agentId: 'agt_limited',
      id: 'refused-client-chat',
      messages: [userText('hello')],
    });
    expect(refused.statusCode).toBe(402);
    // Refused before the user's turn is stored: no chat, no message (decisions.md: 402 stores nothing).
    expect(await t.db.selectFrom('chats').select('id').execute()).toEqual(chatsBefore);
    expect(
      await t.db.selectFrom('chats').select('id').where('client_id', '=', 'refused-client-chat').execute(),
    ).toEqual([]);
    expect(refused.json()).toMatchObject({
      code: 'usage_limit_exceeded',
      details: { limitTokens: 100, usedTokens: 0, reservedTokens: 100 },
    });
    // A refused request reserves nothing and asks the provider nothing.
    expect((await t.db.selectFrom('usage_reservations').select('id').execute()).map((r) => r.id)).toEqual([
      'rsv_live',
    ]);
  });

  it('reserves an image in the prompt at a bounded estimate, so it does not hold a budget it will not use', async () => {
    // About 1 MB of image: some 330,000 tokens if its base64 text were counted.
    const image = `data:image/png;base64,${Buffer.alloc(1_000_000, 7).toString('base64')}`;
    await t.db
      .updateTable('workspaces')
      .set({ monthly_tokens: 10_000 })
      .where('id', '=', 'wsp_limited')
      .execute();
    try {
      upstream.enqueue({ kind: 'held', text: 'A grey square.', afterPieces: 0 });
      const pictured = chat(CHAT_KEYS.limited, {
        agentId: 'agt_limited',
        messages: [
          {
            role: 'user',
            parts: [
              { type: 'text', text: 'What is in this picture?' },
              { type: 'file', url: image, mediaType: 'image/png' },
            ],
          },
        ],
      });
      await upstream.waitForRequests(1);
      const [reservation] = await t.db.selectFrom('usage_reservations').select('tokens').execute();
      // 1,600 for the image (usage-estimate.ts), a few for the text, the output allowance.
      expect(reservation!.tokens).toBeLessThan(1600 + 200 + RESERVED_OUTPUT_TOKENS);
      // A text prompt beside it still fits under the limit.
      const beside = await chat(CHAT_KEYS.limited, { agentId: 'agt_limited', messages: [userText('hello')] });
      expect(beside.statusCode, beside.body).toBe(200);
      upstream.release();
      expect((await pictured).statusCode).toBe(200);
    } finally {
      await t.db
        .updateTable('workspaces')
        .set({ monthly_tokens: 100 })
        .where('id', '=', 'wsp_limited')
        .execute();
    }
  });

  it('a workspace without limits reserves nothing', async () => {
    const res = await chat(CHAT_KEYS.main, { agentId: 'agt_plain', messages: [userText('hi')] });
    expect(res.statusCode).toBe(200);
    expect(await t.db.selectFrom('usage_reservations').selectAll().execute()).toEqual([]);
  });
});
