import { beforeEach, describe, expect, it } from 'vitest';
import { type TestApp } from '../helpers/app.js';
import { DEFAULT_UPSTREAM_TEXT, type FakeUpstream } from '../helpers/fake-upstream.js';
import { chatTitle } from '../../src/services/chat-messages.js';
import { CHAT_KEYS, chatRows, UPSTREAM_KEY, useChatApp, userText } from './fixtures.js';

let upstream: FakeUpstream;
let t: TestApp;

useChatApp((app) => ({ upstream, t } = app));
beforeEach(() => {
  upstream.requests.length = 0;
});

function chat(payload: Record<string, unknown>, key: string = CHAT_KEYS.main) {
  return t.app.inject({ method: 'POST', url: '/v1/chat', headers: { 'x-service-api-key': key }, payload });
}

describe('POST /v1/chat (JSON) on the provider path', () => {
  it('sends the exact system prompt, variables, project context, history and temperature to the provider', async () => {
    const res = await chat({
      agentId: 'agt_helper',
      projectId: 'prj_docs',
      temperature: 0.2,
      variables: { company: 'Acme', tier: 3, beta: true },
      systemVariables: { user: { id: 'ext_7', name: 'Ada', email: 'ada@example.test' } },
      messages: [userText('What is new?')],
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({
      text: DEFAULT_UPSTREAM_TEXT,
      messageId: expect.stringMatching(/^msg_/),
      chatId: expect.stringMatching(/^cht_/),
      usage: { inputTokens: 75, outputTokens: 5, costUsd: expect.any(Number) },
    });
    expect(body.warnings).toBeUndefined();

    const sent = upstream.lastRequest();
    expect(sent.path).toBe('/v1/chat/completions');
    expect(sent.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(sent.body.model).toBe('small-1');
    expect(sent.body.temperature).toBe(0.2);
    expect(sent.body.messages).toEqual([
      {
        role: 'system',
        content:
          'You help Ada (ada@example.test, ext_7) at Acme. Tier 3, beta true. Keep {{unknown}} as is.\n\n' +
          '<project_instructions>\nCite file names.\n</project_instructions>\n\n' +
          '<project_memory>\nThe launch is on Monday.\n</project_memory>',
      },
      { role: 'user', content: 'What is new?' },
    ]);
    expect(sent.body.tools?.map((tool) => tool.function.name)).toEqual([
      'remember',
      'searchProjectFiles',
      'readProjectFile',
    ]);
  });

  it('takes {{user.*}} from the key owner when systemVariables.user is absent, and defaults temperature to 0.7', async () => {
    const res = await chat({ agentId: 'agt_helper', messages: [userText('hi')] }, CHAT_KEYS.mainMember);
    expect(res.statusCode).toBe(200);
    const sent = upstream.lastRequest();
    expect(sent.body.temperature).toBe(0.7);
    expect(sent.body.messages?.[0]).toEqual({
      role: 'system',
      content:
        'You help Max (max@acme.test, usr_max) at {{company}}. Tier {{tier}}, beta {{beta}}. Keep {{unknown}} as is.',
    });
    expect(sent.body.tools).toBeUndefined();
  });

  it('sends no system message for an agent without instructions outside a project', async () => {
    await chat({ agentId: 'agt_plain', messages: [userText('hi')] });
    expect(upstream.lastRequest().body.messages).toEqual([{ role: 'user', content: 'hi' }]);
  });

  it('persists the user and assistant messages with usage and cost, and the ledger', async () => {
    // The app is shared by the file's tests: the ledger is compared with its value before.
    const ledgerRow = () =>
      t.db
        .selectFrom('usage_ledger')
        .selectAll()
        .where('workspace_id', '=', 'wsp_main')
        .where('month', '=', new Date().toISOString().slice(0, 7))
        .executeTakeFirst();
    const before = await ledgerRow();
    upstream.enqueue({ kind: 'text', text: 'Priced reply', usage: { prompt: 1000, completion: 500 } });
    const res = await chat({ agentId: 'agt_plain', messages: [userText('count me', 'u-count')] });
    const { chatId, messageId } = res.json();
    const rows = await chatRows(t.db, chatId);
    expect(rows.map((r) => [r.id, r.role, r.position])).toEqual([
      ['u-count', 'user', 0],
      [messageId, 'assistant', 1],
    ]);
    const assistant = rows[1]!;
    expect(assistant.model).toBe('fake-small');
    expect([assistant.input_tokens, assistant.output_tokens]).toEqual([1000, 500]);
    // 1000 × $1/M + 500 × $2/M
    expect(assistant.cost_usd).toBeCloseTo(0.002, 10);
    expect(JSON.parse(assistant.parts)).toEqual(
      expect.arrayContaining([{ type: 'text', text: 'Priced reply', state: 'done' }]),
    );
    const chatRow = await t.db
      .selectFrom('chats')
      .selectAll()
      .where('id', '=', chatId)
      .executeTakeFirstOrThrow();
    expect(chatRow.spend_usd).toBeCloseTo(0.002, 10);
    expect(chatRow.agent_id).toBe('agt_plain');
    const ledger = await ledgerRow();
    expect(Number(ledger?.input_tokens) - Number(before?.input_tokens ?? 0)).toBe(1000);
    expect(Number(ledger?.output_tokens) - Number(before?.output_tokens ?? 0)).toBe(500);
  });

  it('passes file parts to the model: images as images, text files as text', async () => {
    const png = 'data:image/png;base64,iVBORw0KGgo=';
    const txt = `data:text/plain;base64,${Buffer.from('file body').toString('base64')}`;
    const res = await chat({
      agentId: 'agt_plain',
      messages: [
        {
          role: 'user',
          parts: [
            { type: 'text', text: 'look' },
            { type: 'file', url: png, mediaType: 'image/png', filename: 'a.png' },
            { type: 'file', url: txt, mediaType: 'text/plain', filename: 'notes.txt' },
            { type: 'data-custom', data: { kept: true } },
          ],
        },
      ],
    });
    expect(res.statusCode).toBe(200);
    const content = upstream.lastRequest().body.messages?.[0]?.content as Array<Record<string, unknown>>;
    expect(content[0]).toEqual({ type: 'text', text: 'look' });
    expect(content[1]).toMatchObject({ type: 'image_url', image_url: { url: png } });
    expect(content[2]).toEqual({
      type: 'text',
      text: '<attachment name="notes.txt" type="text/plain">\nfile body\n</attachment>',
    });
    expect(content).toHaveLength(3);
    const rows = await chatRows(t.db, res.json().chatId);
    expect(JSON.parse(rows[0]!.parts)).toHaveLength(4);
  });

  it('reads a text file whose data: URL is written in capitals (schemes are case-insensitive)', async () => {
    const txt = `DATA:text/plain;BASE64,${Buffer.from('shouted body').toString('base64')}`;
    const res = await chat({
      agentId: 'agt_plain',
      messages: [
        { role: 'user', parts: [{ type: 'file', url: txt, mediaType: 'text/plain', filename: 'loud.txt' }] },
      ],
    });
    expect(res.statusCode).toBe(200);
    const content = upstream.lastRequest().body.messages?.[0]?.content;
    expect(JSON.stringify(content)).toContain(
      JSON.stringify('<attachment name="loud.txt" type="text/plain">\nshouted body\n</attachment>'),
    );
  });
});

describe('chat title', () => {
  const storedTitle = async (chatId: string) =>
    (await t.db.selectFrom('chats').select('title').where('id', '=', chatId).executeTakeFirstOrThrow()).title;
  /** The title a chat is given whose first message is `text`. */
  const titleOf = async (text: string) =>
    storedTitle((await chat({ agentId: 'agt_plain', messages: [userText(text)] })).json().chatId);

  it('collapses whitespace and cuts at a word boundary at most 100 characters long', async () => {
    const words = Array.from({ length: 30 }, (_, i) => `word${i}`).join('  \n ');
    const res = await chat({ agentId: 'agt_plain', messages: [userText(words)] });
    const title = await storedTitle(res.json().chatId);
    const collapsed = words.replace(/\s+/g, ' ');
    expect(title.length).toBeLessThanOrEqual(100);
    expect(collapsed.startsWith(title)).toBe(true);
    expect(collapsed[title.length]).toBe(' ');
    expect(title).toBe(
      'word0 word1 word2 word3 word4 word5 word6 word7 word8 word9 word10 word11 word12 word13 word14',
    );
  });

  it('uses the first user message, not a system or assistant one, and keeps a short text whole', async () => {
    const res = await chat({
      agentId: 'agt_plain',
      messages: [
        { role: 'system', parts: [{ type: 'text', text: 'Be brief.' }] },
        {
          role: 'user',
          parts: [
            { type: 'text', text: '  Plan   the ' },
            { type: 'text', text: 'launch ' },
          ],
        },
      ],
    });
    const title = await storedTitle(res.json().chatId);
    expect(title).toBe('Plan the launch');
  });

  it('cuts a single word longer than 100 characters hard', async () => {
    const res = await chat({ agentId: 'agt_plain', messages: [userText('x'.repeat(150))] });
    const title = await storedTitle(res.json().chatId);
    expect(title).toBe('x'.repeat(100));
  });

  it('counts characters as code points, as a rename does, and never cuts an emoji in half', async () => {
    // 100 emoji are 200 UTF-16 units: a cut by units kept 50 of them.
    expect(await titleOf('😀'.repeat(120))).toBe('😀'.repeat(100));
    // Cut by units, the 100th unit was the first half of an emoji: stored as U+FFFD (one on
    // PostgreSQL, three on SQLite).
    expect(await titleOf(`a${'😀'.repeat(120)}`)).toBe(`a${'😀'.repeat(99)}`);
    expect(await titleOf(`${'😀'.repeat(99)} more words`)).toBe('😀'.repeat(99));
  });

  it('titles a first message of invisible format characters alone (zero-width spaces) New chat', async () => {
    const res = await chat({ agentId: 'agt_plain', messages: [userText('\u200b \u2060\u200b')] });
    const title = await storedTitle(res.json().chatId);
    expect(title).toBe('New chat');
  });

  it('titles a first message of blank fillers, variation selectors or tag characters alone New chat', async () => {
    for (const text of ['\u3164', '\u2800 \ufe0f', '\u115f\u1160\uffa0', '\u{e0041}\u034f', '\u0301']) {
      const res = await chat({ agentId: 'agt_plain', messages: [userText(text)] });
      expect(await storedTitle(res.json().chatId), JSON.stringify(text)).toBe('New chat');
    }
  });

  it('makes a title of one line: control characters count as whitespace, as a rename refuses them', async () => {
    const res = await chat({
      agentId: 'agt_plain',
      messages: [userText('first\u0085second\u001b[31mred\u0007 \u009fend')],
    });
    const title = await storedTitle(res.json().chatId);
    expect(title).toBe('first second [31mred end');
    // The title the chat was given is one a rename would take.
    const renamed = await t.app.inject({
      method: 'PATCH',
      url: `/v1/chats/${res.json().chatId}`,
      headers: { 'x-service-api-key': CHAT_KEYS.main },
      payload: { title: title },
    });
    expect(renamed.statusCode).toBe(200);
  });
});

describe('chat title of a long first message', () => {
  const titleFrom = (text: string) => chatTitle([{ role: 'user', parts: [{ type: 'text', text }] }]);

  it('is made from the start of a 15 MB message (within the chat body limit) as from a short one', () => {
    // It split the whole text into one string per character: 7 s of this process's only thread
    // for 3 million words, every other request waiting. What it costs now is measured by
    // bench/chat-title.bench.ts (against parsing the same body), not timed here.
    const texts = ['word '.repeat(3_000_000), 'x'.repeat(16_000_000), `${' \n'.repeat(5_000_000)}late start`];
    expect(texts.map(titleFrom)).toEqual([`${'word '.repeat(19)}word`, 'x'.repeat(100), 'late start']);
  });

  it('collapses whitespace and control characters the same way past a long run of them', () => {
    expect(titleFrom(`a${' \t\u0085'.repeat(1000)}b  `)).toBe('a b');
    // The first 100 characters show nothing: such a title would be an empty line in every list.
    expect(titleFrom(`${'\u200b'.repeat(120)} words`)).toBe('New chat');
    expect(titleFrom(`${'\u200b'.repeat(100)}word`)).toBe('New chat');
    // Cut at the word boundary, the title would be the zero-width space alone: cut hard instead.
    expect(titleFrom(`\u200b ${'x'.repeat(150)}`)).toBe(`\u200b ${'x'.repeat(98)}`);
    expect(titleFrom('\u200b \u2060\u0007'.repeat(1000))).toBe('New chat');
    expect(titleFrom(`${'ab '.repeat(33)}c`)).toBe(`${'ab '.repeat(33)}c`);
    expect(titleFrom(`${'ab '.repeat(33)}cd`)).toBe(`${'ab '.repeat(32)}ab`);
    expect(titleFrom(`${'x'.repeat(99)}\ud800tail`)).toBe(`${'x'.repeat(99)}\ud800`);
  });
});

describe('continuing a chat', () => {
  it('merges history: full message lists and partial ones give the same conversation', async () => {
    const first = await chat({ agentId: 'agt_plain', messages: [userText('one', 'm1')] });
    const { chatId, messageId } = first.json();
    const assistant = {
      id: messageId,
      role: 'assistant',
      parts: [{ type: 'text', text: DEFAULT_UPSTREAM_TEXT }],
    };

    // useChat style: the whole conversation again, plus the new turn.
    const full = await chat({
      agentId: 'agt_plain',
      chatId,
      messages: [userText('one', 'm1'), assistant, userText('two', 'm2')],
    });
    expect(full.statusCode).toBe(200);
    expect(full.json().chatId).toBe(chatId);
    const expected = [
      { role: 'user', content: 'one' },
      { role: 'assistant', content: DEFAULT_UPSTREAM_TEXT },
      { role: 'user', content: 'two' },
    ];
    expect(upstream.lastRequest().body.messages).toEqual(expected);

    // Only the new turn.
    const partial = await chat({ agentId: 'agt_plain', chatId, messages: [userText('three')] });
    expect(partial.statusCode).toBe(200);
    expect(upstream.lastRequest().body.messages).toEqual([
      ...expected,
      { role: 'assistant', content: DEFAULT_UPSTREAM_TEXT },
      { role: 'user', content: 'three' },
    ]);
    const rows = await chatRows(t.db, chatId);
    expect(rows.map((r) => r.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user', 'assistant']);
    expect(rows.map((r) => r.position)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(rows.slice(0, 3).map((r) => r.id)).toEqual(['m1', messageId, 'm2']);
  });

  it('lets two chats hold messages with the same client id', async () => {
    const a = await chat({ agentId: 'agt_plain', messages: [userText('a', 'same-id')] });
    const b = await chat({ agentId: 'agt_plain', messages: [userText('b', 'same-id')] });
    expect([a.statusCode, b.statusCode]).toEqual([200, 200]);
    expect(a.json().chatId).not.toBe(b.json().chatId);
  });

  it('keeps the title of a continued chat', async () => {
    const first = await chat({ agentId: 'agt_plain', messages: [userText('Original title')] });
    const { chatId } = first.json();
    await chat({ agentId: 'agt_plain', chatId, messages: [userText('Something else')] });
    const row = await t.db
      .selectFrom('chats')
      .select('title')
      .where('id', '=', chatId)
      .executeTakeFirstOrThrow();
    expect(row.title).toBe('Original title');
  });

  it('answers 404 for an unknown chatId and stores nothing', async () => {
    const res = await chat({ agentId: 'agt_plain', chatId: 'cht_nope', messages: [userText('hi')] });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: 'not_found', details: {} });
    expect(upstream.requests).toHaveLength(0);
  });

  it('answers 404 for a chat of another workspace', async () => {
    const other = await chat({ agentId: 'agt_other', messages: [userText('hi')] }, CHAT_KEYS.other);
    const res = await chat({ agentId: 'agt_plain', chatId: other.json().chatId, messages: [userText('hi')] });
    expect(res.statusCode).toBe(404);
  });

  it('answers 400 for a chat of another agent', async () => {
    const first = await chat({ agentId: 'agt_plain', messages: [userText('hi')] });
    const res = await chat({
      agentId: 'agt_helper',
      chatId: first.json().chatId,
      messages: [userText('hi')],
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'bad_request', details: { issues: [{ path: 'body.chatId' }] } });
  });
});

describe('tenancy', () => {
  it('answers 404 for an agent of another workspace, an unknown agent and a deleted agent', async () => {
    for (const agentId of ['agt_other', 'agt_unknown', 'agt_gone']) {
      const res = await chat({ agentId, messages: [userText('hi')] });
      expect(res.statusCode, agentId).toBe(404);
      expect(res.json().code).toBe('not_found');
    }
  });

  it('answers 404 for a project of another workspace or an unknown project', async () => {
    for (const projectId of ['prj_other', 'prj_unknown']) {
      const res = await chat({ agentId: 'agt_plain', projectId, messages: [userText('hi')] });
      expect(res.statusCode, projectId).toBe(404);
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it('lets an organization key chat with an agent of its organization', async () => {
    const res = await chat({ agentId: 'agt_plain', messages: [userText('hi')] }, CHAT_KEYS.org);
    expect(res.statusCode).toBe(200);
  });

  it('answers 401 without a key', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/chat',
      payload: { agentId: 'agt_plain', messages: [userText('hi')] },
    });
    expect(res.statusCode).toBe(401);
  });
});

describe('model choice', () => {
  it('uses an enabled model the request names', async () => {
    await chat({ agentId: 'agt_plain', model: 'fake-large', messages: [userText('hi')] });
    expect(upstream.lastRequest().body.model).toBe('large-1');
  });

  it('falls back silently to the workspace default for a model not enabled or unknown', async () => {
    for (const model of ['fake-disabled', 'no-such-model']) {
      const res = await chat({ agentId: 'agt_plain', model, messages: [userText('hi')] });
      expect(res.statusCode).toBe(200);
      expect(upstream.lastRequest().body.model).toBe('small-1');
    }
  });

  it("uses the agent's own model, and the echo model offline", async () => {
    const res = await chat({ agentId: 'agt_echo', messages: [userText('hi')] });
    expect(res.statusCode).toBe(200);
    expect(upstream.requests).toHaveLength(0);
    expect(res.json().text).toContain('atrium/echo');
  });
});

describe('concurrent turns on one chat', () => {
  it('stores every turn with distinct positions when requests race', async () => {
    const first = await chat({ agentId: 'agt_plain', messages: [userText('start')] });
    const { chatId } = first.json();
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        chat({ agentId: 'agt_plain', chatId, messages: [userText(`turn ${i}`, `turn-${i}`)] }),
      ),
    );
    expect(results.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200, 200]);
    const rows = await chatRows(t.db, chatId);
    expect(rows).toHaveLength(2 + 6 * 2);
    expect(rows.map((r) => r.position)).toEqual(rows.map((_, i) => i));
    expect(new Set(rows.map((r) => r.id)).size).toBe(rows.length);
  });
});
