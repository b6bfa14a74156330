import { beforeEach, describe, expect, it } from 'vitest';
import { type TestApp } from '../helpers/app.js';
import { type FakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, countRows, useChatApp, userText } from './fixtures.js';

let upstream: FakeUpstream;
let t: TestApp;
const month = new Date().toISOString().slice(0, 7);

useChatApp((app) => ({ upstream, t } = app));
beforeEach(async () => {
  upstream.requests.length = 0;
  await t.db.deleteFrom('usage_ledger').execute();
  await t.db
    .updateTable('workspaces')
    .set({ monthly_tokens: 100, monthly_cost_usd: 0.5 })
    .where('id', '=', 'wsp_limited')
    .execute();
});

function post(url: string, key: string, payload: Record<string, unknown>) {
  return t.app.inject({ method: 'POST', url, headers: { 'x-service-api-key': key }, payload });
}

/** The limited workspace's row of the month's usage ledger. */
const limitedLedger = () =>
  t.db
    .selectFrom('usage_ledger')
    .selectAll()
    .where('workspace_id', '=', 'wsp_limited')
    .executeTakeFirstOrThrow();

async function expectRefusedWithNothingStored(
  request: () => Promise<{ statusCode: number; json(): { code: string; details: Record<string, unknown> } }>,
  code: string,
) {
  const before = await countRows(t.db);
  const ledger = await t.db.selectFrom('usage_ledger').selectAll().execute();
  const res = await request();
  expect(res.statusCode).toBe(402);
  expect(res.json()).toMatchObject({ code });
  expect(await countRows(t.db)).toEqual(before);
  expect(await t.db.selectFrom('usage_ledger').selectAll().execute()).toEqual(ledger);
  expect(upstream.requests).toHaveLength(0);
  return res.json();
}

describe('workspace usage limit (402 usage_limit_exceeded)', () => {
  it('refuses chats and runs once the month has used the token limit, storing nothing', async () => {
    upstream.enqueue({ kind: 'text', text: 'ok', usage: { prompt: 80, completion: 30 } });
    const first = await post('/v1/chat', CHAT_KEYS.limited, {
      agentId: 'agt_limited',
      messages: [userText('hi')],
    });
    expect(first.statusCode).toBe(200);
    const ledger = await t.db
      .selectFrom('usage_ledger')
      .selectAll()
      .where('workspace_id', '=', 'wsp_limited')
      .executeTakeFirstOrThrow();
    expect([Number(ledger.input_tokens), Number(ledger.output_tokens), ledger.month]).toEqual([
      80,
      30,
      month,
    ]);
    upstream.requests.length = 0;

    const error = await expectRefusedWithNothingStored(
      () => post('/v1/chat', CHAT_KEYS.limited, { agentId: 'agt_limited', messages: [userText('again')] }),
      'usage_limit_exceeded',
    );
    expect(error.details).toMatchObject({ month, limitTokens: 100, usedTokens: 110 });
    await expectRefusedWithNothingStored(
      () =>
        post('/v1/chat', CHAT_KEYS.limited, {
          agentId: 'agt_limited',
          chatId: first.json().chatId,
          messages: [userText('again')],
        }),
      'usage_limit_exceeded',
    );
    await expectRefusedWithNothingStored(
      () => post('/v1/agents/agt_limited/runs', CHAT_KEYS.limited, { message: 'again' }),
      'usage_limit_exceeded',
    );
  });

  it('refuses once the month has spent the cost limit', async () => {
    await t.db
      .updateTable('workspaces')
      .set({ monthly_tokens: null })
      .where('id', '=', 'wsp_limited')
      .execute();
    await t.db
      .insertInto('usage_ledger')
      .values({
        workspace_id: 'wsp_limited',
        month,
        input_tokens: 1,
        output_tokens: 1,
        cost_usd: 0.5,
        updated_at: new Date().toISOString(),
      })
      .execute();
    const error = await expectRefusedWithNothingStored(
      () => post('/v1/chat', CHAT_KEYS.limited, { agentId: 'agt_limited', messages: [userText('hi')] }),
      'usage_limit_exceeded',
    );
    expect(error.details).toMatchObject({ limitUsd: 0.5, usedUsd: 0.5 });
  });

  it('counts only the current month', async () => {
    await t.db
      .insertInto('usage_ledger')
      .values({
        workspace_id: 'wsp_limited',
        month: '2000-01',
        input_tokens: 10_000,
        output_tokens: 0,
        cost_usd: 100,
        updated_at: new Date().toISOString(),
      })
      .execute();
    const res = await post('/v1/chat', CHAT_KEYS.limited, {
      agentId: 'agt_limited',
      messages: [userText('hi')],
    });
    expect(res.statusCode).toBe(200);
  });

  it.each([
    ['streamed', true],
    ['JSON', false],
  ])(
    'charges a %s reply from a provider that reports no usage its estimate, so the limit still holds',
    async (_mode, stream) => {
      const text = 'word '.repeat(20);
      upstream.enqueue({ kind: 'text', text, noUsage: true });
      const first = await post('/v1/chat', CHAT_KEYS.limited, {
        agentId: 'agt_limited',
        stream,
        messages: [userText('x'.repeat(400))],
      });
      expect(first.statusCode).toBe(200);
      const reply = await t.db
        .selectFrom('messages')
        .selectAll()
        .where('workspace_id', '=', 'wsp_limited')
        .where('role', '=', 'assistant')
        .orderBy('created_at', 'desc')
        .executeTakeFirstOrThrow();
      // The prompt (400 characters and its JSON) and the 100 characters of text, at about four
      // characters a token, priced as fake-small (1 and 2 USD per million tokens).
      expect(reply.input_tokens).toBeGreaterThan(100);
      expect(reply.output_tokens).toBe(Math.ceil(text.length / 4));
      expect(reply.cost_usd).toBeCloseTo((reply.input_tokens + 2 * reply.output_tokens) / 1e6, 12);
      const told = stream
        ? JSON.parse(
            first.body
              .split('\n')
              .find((line) => line.includes('"type":"finish"'))!
              .slice(6),
          ).messageMetadata.usage
        : first.json().usage;
      expect(told).toMatchObject({ inputTokens: reply.input_tokens, outputTokens: reply.output_tokens });
      const ledger = await limitedLedger();
      expect([Number(ledger.input_tokens), Number(ledger.output_tokens)]).toEqual([
        reply.input_tokens,
        reply.output_tokens,
      ]);
      upstream.requests.length = 0;
      await expectRefusedWithNothingStored(
        () => post('/v1/chat', CHAT_KEYS.limited, { agentId: 'agt_limited', messages: [userText('again')] }),
        'usage_limit_exceeded',
      );
    },
  );

  it('charges a streamed reply its provider failed after reasoning for that reasoning, so the limit still holds', async () => {
    // A reasoning model's thinking (never sent to the client), then the provider's error: 400
    // characters of reasoning, about 100 output tokens at four characters a token.
    const reasoning = 'step '.repeat(80);
    upstream.enqueue({
      kind: 'inserted',
      text: '',
      afterPieces: 0,
      reasoning,
      event: `data: ${JSON.stringify({ error: { message: 'overloaded', type: 'server_error' } })}\n\n`,
    });
    const first = await post('/v1/chat', CHAT_KEYS.limited, {
      agentId: 'agt_limited',
      stream: true,
      messages: [userText('think')],
    });
    expect(first.statusCode).toBe(200);
    const told = JSON.parse(
      first.body
        .split('\n')
        .find((line) => line.includes('"type":"finish"'))!
        .slice(6),
    ).messageMetadata;
    expect(told).toMatchObject({ finishReason: 'error', usage: { outputTokens: reasoning.length / 4 } });
    const ledger = await limitedLedger();
    expect([Number(ledger.input_tokens), Number(ledger.output_tokens)]).toEqual([
      told.usage.inputTokens,
      reasoning.length / 4,
    ]);
    expect(ledger.cost_usd).toBeCloseTo((told.usage.inputTokens + (2 * reasoning.length) / 4) / 1e6, 12);
    upstream.requests.length = 0;
    await expectRefusedWithNothingStored(
      () => post('/v1/chat', CHAT_KEYS.limited, { agentId: 'agt_limited', messages: [userText('again')] }),
      'usage_limit_exceeded',
    );
  });

  it('checks limits after the body: a bad body is still a 400', async () => {
    await t.db.updateTable('workspaces').set({ monthly_tokens: 0 }).where('id', '=', 'wsp_limited').execute();
    const res = await post('/v1/chat', CHAT_KEYS.limited, { agentId: 'agt_limited', messages: [] });
    expect(res.statusCode).toBe(400);
  });
});

describe('chat spend cap (402 spend_cap_exceeded)', () => {
  it('refuses to continue a chat that has spent its cap, storing nothing; a new chat still runs', async () => {
    // 100 × $10/M + 100 × $20/M = $0.003, over the $0.001 cap.
    upstream.enqueue({ kind: 'text', text: 'pricey', usage: { prompt: 100, completion: 100 } });
    const first = await post('/v1/chat', CHAT_KEYS.capped, {
      agentId: 'agt_capped',
      messages: [userText('hi')],
    });
    expect(first.statusCode).toBe(200);
    const { chatId } = first.json();
    const chat = await t.db
      .selectFrom('chats')
      .select('spend_usd')
      .where('id', '=', chatId)
      .executeTakeFirstOrThrow();
    expect(chat.spend_usd).toBeCloseTo(0.003, 10);
    upstream.requests.length = 0;

    const error = await expectRefusedWithNothingStored(
      () =>
        post('/v1/chat', CHAT_KEYS.capped, { agentId: 'agt_capped', chatId, messages: [userText('more')] }),
      'spend_cap_exceeded',
    );
    expect(error.details).toMatchObject({ chatId, capUsd: 0.001 });
    await expectRefusedWithNothingStored(
      () => post('/v1/agents/agt_capped/runs', CHAT_KEYS.capped, { message: 'more', chatId }),
      'spend_cap_exceeded',
    );

    const fresh = await post('/v1/chat', CHAT_KEYS.capped, {
      agentId: 'agt_capped',
      messages: [userText('new chat')],
    });
    expect(fresh.statusCode).toBe(200);
  });
});
