import { MAX_JSON_CONTAINERS } from '../../src/limits.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { keyedCaller, MANAGEMENT_SETUP, MKEYS } from './fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
const now = new Date('2026-11-22T10:00:00.000Z');
beforeAll(async () => {
  t = await createTestApp({ setup: MANAGEMENT_SETUP, clock: () => now });
});
afterAll(() => t.close());

const call = keyedCaller(() => t.app);
const createAgent = (payload: unknown, key: string = MKEYS.owner, workspace = 'wsp_main') =>
  call('POST', `/v1/workspace/${workspace}/agents`, key, payload);

/** The ids of the agents of a title (the race tests: one must win). */
const agentIdsTitled = (title: string) =>
  t.env.database.db.selectFrom('agents').select('id').where('title', '=', title).execute();

describe(`POST /v1/workspace/{id}/agents (${engineName})`, () => {
  it('creates an API-managed agent with every field and answers 201 with its detail', async () => {
    const res = await createAgent({
      title: 'Support',
      description: 'Helps',
      image: 'https://example.test/s.png',
      category: 'support',
      visibility: 'organization',
      model: 'local/small',
      instructions: 'Be kind.',
      tools: [
        {
          type: 'mcp',
          name: 'crm',
          url: 'https://mcp.example.test/',
          headers: { authorization: 'Bearer s3cret' },
        },
      ],
      orchestration: { agents: ['agt_listed'] },
    });
    expect(res.statusCode).toBe(201);
    const { agent } = res.json().data;
    expect(agent).toEqual({
      id: expect.stringMatching(/^agt_/),
      title: 'Support',
      description: 'Helps',
      image: 'https://example.test/s.png',
      category: 'support',
      visibility: 'organization',
      model: 'local/small',
      instructions: 'Be kind.',
      tools: [
        { type: 'mcp', name: 'crm', url: 'https://mcp.example.test/', headers: { authorization: '***' } },
      ],
      orchestration: { agents: ['agt_listed'] },
      managedBy: 'api',
      createdAt: now.toISOString(),
      updatedAt: now.toISOString(),
    });
    const row = await t.env.database.db
      .selectFrom('agents')
      .selectAll()
      .where('id', '=', agent.id)
      .executeTakeFirstOrThrow();
    expect(JSON.parse(row.tools)[0].headers.authorization).toBe('Bearer s3cret');
    const read = await call('GET', `/v1/agents/${agent.id}`, MKEYS.member);
    expect(read.json().data.agent).toEqual(agent);
  });

  it('defaults optional fields and lists the new agent', async () => {
    const res = await createAgent({ title: 'Minimal' }, MKEYS.admin);
    expect(res.statusCode).toBe(201);
    expect(res.json().data.agent).toMatchObject({
      description: '',
      image: '',
      category: '',
      visibility: 'workspace',
      model: 'atrium/echo',
      instructions: '',
      tools: [],
      orchestration: null,
      managedBy: 'api',
    });
    const list = await call('GET', '/v1/workspace/wsp_main/agents', MKEYS.member);
    expect(list.json().data.agents.map((a: { title: string }) => a.title)).toContain('Minimal');
  });

  it('sorts titles case-insensitively: "éa" before "Éb", on both engines', async () => {
    for (const title of ['Éb', 'éa']) expect((await createAgent({ title })).statusCode).toBe(201);
    const res = await call('GET', '/v1/workspace/wsp_main/agents?limit=100', MKEYS.owner);
    const titles = (res.json().data.agents as Array<{ title: string }>).map((a) => a.title);
    expect(titles.filter((x) => x === 'éa' || x === 'Éb')).toEqual(['éa', 'Éb']);
    // The OpenAI model list gives the agents in the agent list's order.
    const models = await call('GET', '/v1/openai/models', MKEYS.owner);
    const names = (models.json().data as Array<{ name: string }>).map((m) => m.name);
    expect(names.filter((x) => x === 'éa' || x === 'Éb')).toEqual(['éa', 'Éb']);
  });

  it('refuses a duplicate title with 409 conflict', async () => {
    const res = await createAgent({ title: 'From file' });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ code: 'conflict', details: { field: 'title' } });
  });

  it('creates at most one agent of a title when four requests race', async () => {
    const answers = await Promise.all([1, 2, 3, 4].map(() => createAgent({ title: 'Twin' })));
    expect(answers.map((res) => res.statusCode).sort()).toEqual([201, 409, 409, 409]);
    expect(await agentIdsTitled('Twin')).toHaveLength(1);
  });

  it.each([
    ['missing title', {}, 'body.title'],
    ['blank title', { title: '   ' }, 'body.title'],
    ['title too long', { title: 't'.repeat(101) }, 'body.title'],
    ['description too long', { title: 'x', description: 'd'.repeat(2001) }, 'body.description'],
    ['image not a URL', { title: 'x', image: 'not a url' }, 'body.image'],
    ['unknown visibility', { title: 'x', visibility: 'public' }, 'body.visibility'],
    ['instructions too long', { title: 'x', instructions: 'i'.repeat(40_001) }, 'body.instructions'],
    [
      'tool of unknown type',
      { title: 'x', tools: [{ type: 'http', name: 'a', url: 'https://a.test' }] },
      'body.tools',
    ],
    ['model not enabled', { title: 'x', model: 'local/large' }, 'body.model'],
    ['unknown model', { title: 'x', model: 'nope/nope' }, 'body.model'],
    [
      'orchestration of another workspace',
      { title: 'x', orchestration: { agents: ['agt_other'] } },
      'body.orchestration.agents.0',
    ],
    ['null title', { title: null }, 'body.title'],
  ])('answers 400 for %s', async (_name, payload, path) => {
    const res = await createAgent(payload);
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('bad_request');
    expect(JSON.stringify(res.json().details)).toContain(path.split('[')[0]);
  });

  it('takes an https, http or data:image URL as image, or none, and refuses any other scheme at body.image', async () => {
    const message =
      'must be an https or http URL, or a data:image/… URL (no other scheme, such as javascript:)';
    for (const image of [
      'javascript:alert(1)',
      'JAVASCRIPT:alert(1)',
      'vbscript:msgbox(1)',
      'data:text/html,<script>alert(1)</script>',
      'ftp://cdn.test/a.png',
    ]) {
      const res = await createAgent({ title: 'Pictured', image });
      expect(res.statusCode, image).toBe(400);
      expect(res.json(), image).toEqual({
        code: 'bad_request',
        message: `body.image ${message}`,
        details: { issues: [{ path: 'body.image', message }] },
      });
    }
    const created = await createAgent({ title: 'Pictured', image: 'data:image/png;base64,iVBORw0KGgo=' });
    expect(created.statusCode).toBe(201);
    const url = `/v1/agents/${created.json().data.agent.id}`;
    const patched = await call('PATCH', url, MKEYS.owner, { image: 'javascript:alert(1)' });
    expect(patched.statusCode).toBe(400);
    expect(patched.json().details.issues).toEqual([{ path: 'body.image', message }]);
    for (const image of ['http://cdn.test/a.png', '', null]) {
      expect((await call('PATCH', url, MKEYS.owner, { image })).statusCode, String(image)).toBe(200);
    }
    expect((await call('GET', url, MKEYS.owner)).json().data.agent.image).toBe('');
  });

  it('refuses two tools of one name in one agent with 400 at the second', async () => {
    const tools = [
      { type: 'mcp', name: 'crm', url: 'https://a.example.test/' },
      { type: 'mcp', name: 'docs', url: 'https://b.example.test/' },
      { type: 'mcp', name: 'crm', url: 'https://c.example.test/' },
    ];
    const message = 'is "crm", the name of body.tools.0: each tool of an agent needs its own name';
    const res = await createAgent({ title: 'Twice', tools });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      code: 'bad_request',
      message: `body.tools.2.name ${message}`,
      details: { issues: [{ path: 'body.tools.2.name', message }] },
    });
    const created = await createAgent({ title: 'Twice', tools: tools.slice(0, 2) });
    expect(created.statusCode).toBe(201);
    const patched = await call('PATCH', `/v1/agents/${created.json().data.agent.id}`, MKEYS.owner, { tools });
    expect(patched.statusCode).toBe(400);
    expect(patched.json().details.issues).toEqual([{ path: 'body.tools.2.name', message }]);
  });

  it('answers 400 for an MCP server URL that is not http or https, saying so (not that it is private)', async () => {
    for (const url of [
      'ftp://mcp.example.test/',
      'data:text/plain,hi',
      'ws://mcp.example.test/',
      'mailto:a@b.test',
    ]) {
      const res = await createAgent({ title: 'Schemes', tools: [{ type: 'mcp', name: 'a', url }] });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().details.issues, url).toEqual([
        { path: 'body.tools.0.url', message: 'must be an http or https URL (a streamable-HTTP MCP server)' },
      ]);
    }
    const created = await createAgent({ title: 'Schemes' });
    expect(created.statusCode).toBe(201);
    const patched = await call('PATCH', `/v1/agents/${created.json().data.agent.id}`, MKEYS.owner, {
      tools: [{ type: 'mcp', name: 'a', url: 'ftp://mcp.example.test/' }],
    });
    expect(patched.statusCode).toBe(400);
    expect(patched.json().message).toBe(
      'body.tools.0.url must be an http or https URL (a streamable-HTTP MCP server)',
    );
  });

  it('answers 400 for an MCP header HTTP cannot send (it was stored, and the server reported unreachable), never quoting its value', async () => {
    const NAME = "is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)";
    const VALUE =
      'holds a character an HTTP header value cannot carry (a line break, NUL or other control character, or one past U+00FF)';
    const FRAMING =
      'is set by the HTTP connection itself (Content-Length, Transfer-Encoding, Keep-Alive, Upgrade, Expect, a Connection other than close or keep-alive)';
    const cases: Array<[Record<string, string>, string, string]> = [
      [{ 'x api key': 'v' }, 'x api key', NAME],
      [{ '': 'v' }, '', NAME],
      [{ authorization: 'Bearer secret-1\nsecret-2' }, 'authorization', VALUE],
      [{ authorization: 'Bearer s\u20acret' }, 'authorization', VALUE],
      [{ 'x-key': 'a\u0001b' }, 'x-key', VALUE],
      [{ 'Content-Length': '5' }, 'Content-Length', FRAMING],
      [{ 'transfer-encoding': 'chunked' }, 'transfer-encoding', FRAMING],
      [{ connection: 'upgrade' }, 'connection', FRAMING],
    ];
    const created = await createAgent({ title: 'Headers' });
    expect(created.statusCode).toBe(201);
    for (const [headers, name, message] of cases) {
      const tools = [{ type: 'mcp', name: 'a', url: 'https://mcp.example.test/', headers }];
      for (const res of [
        await createAgent({ title: 'Headers 2', tools }),
        await call('PATCH', `/v1/agents/${created.json().data.agent.id}`, MKEYS.owner, { tools }),
      ]) {
        expect(res.statusCode, JSON.stringify(headers)).toBe(400);
        expect(res.json().details.issues, JSON.stringify(headers)).toEqual([
          { path: `body.tools.0.headers.${name}`, message },
        ]);
        expect(res.body).not.toContain('secret');
      }
    }
    // What fetch sends as it is: Latin-1, tabs, surrounding whitespace (trimmed), an empty value,
    // any token as a name, Connection: close, Host.
    const sendable = {
      authorization: 'Bearer caf\u00e9',
      'x-tabbed': 'a\tb',
      'x-trailing-newline': 'token\n',
      'x-empty': '',
      "x-!#$%&'*+-.^_`|~": 'v',
      connection: 'close',
      host: 'mcp.example.test',
    };
    const ok = await createAgent({
      title: 'Headers 3',
      tools: [{ type: 'mcp', name: 'a', url: 'https://mcp.example.test/', headers: sendable }],
    });
    expect(ok.statusCode, ok.body).toBe(201);
  });

  it('names the type a tool takes for a type of another kind, as the setup file does, on create and patch', async () => {
    // The API stops at a body's first problem, AJV's "must be string" for `type: 5`; the setup
    // file, which sees every problem, says `must be "mcp"` (test/setup/union-messages.test.ts).
    const created = await createAgent({ title: 'Typed tools' });
    expect(created.statusCode).toBe(201);
    const url = `/v1/agents/${created.json().data.agent.id}`;
    for (const type of [5, null, true, ['mcp'], { mcp: true }, 'sse']) {
      const tools = [{ type, name: 'a', url: 'https://a.test/' }];
      for (const res of [
        await createAgent({ title: 'Typed tools 2', tools }),
        await call('PATCH', url, MKEYS.owner, { tools }),
      ]) {
        expect(res.statusCode, JSON.stringify(type)).toBe(400);
        expect(res.json(), JSON.stringify(type)).toEqual({
          code: 'bad_request',
          message: 'body.tools.0.type must be "mcp"',
          details: { issues: [{ path: 'body.tools.0.type', message: 'must be "mcp"' }] },
        });
      }
    }
  });

  it('names a field one way whichever check refuses it: the schema or the rules after it', async () => {
    // The schema refuses a URL that is no URL; the rules after it refuse an ftp: one. A client
    // that maps details.issues[].path to its form fields must find both at the same path.
    for (const url of ['not a url', 'ftp://mcp.example.test/']) {
      const res = await createAgent({ title: 'Paths', tools: [{ type: 'mcp', name: 'a', url }] });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().details.issues[0].path, url).toBe('body.tools.0.url');
    }
    const orchestrated = await createAgent({ title: 'Paths', orchestration: { agents: ['agt_other'] } });
    expect(orchestrated.json().details.issues).toEqual([
      { path: 'body.orchestration.agents.0', message: expect.any(String) },
    ]);
  });

  it('answers 400 for malformed JSON and 413 for an oversized body', async () => {
    const bad = await t.app.inject({
      method: 'POST',
      url: '/v1/workspace/wsp_main/agents',
      headers: { 'x-service-api-key': MKEYS.owner, 'content-type': 'application/json' },
      payload: '{"title":',
    });
    expect(bad.statusCode).toBe(400);
    const big = await createAgent({ title: 'big', instructions: 'x'.repeat(2_000_000) });
    expect(big.statusCode).toBe(413);
  });

  it.each([
    ['a member key', MKEYS.member, 'wsp_main', 401, 'unauthorized'],
    ['an organization key whose user is a member', MKEYS.acmeOrgMember, 'wsp_main', 401, 'unauthorized'],
    ['a key of another workspace', MKEYS.otherWorkspace, 'wsp_main', 401, 'unauthorized'],
    ['a key of another tenant', MKEYS.globexWorkspace, 'wsp_main', 401, 'unauthorized'],
    ['an unknown workspace', MKEYS.owner, 'wsp_nowhere', 404, 'not_found'],
    ['no key', '', 'wsp_main', 401, 'not_authenticated'],
  ])('refuses %s', async (_name, key, workspace, status, code) => {
    const res = await createAgent({ title: `Refused ${code}` }, key, workspace);
    expect(res.statusCode).toBe(status);
    expect(res.json().code).toBe(code);
  });

  it('lets an organization key of an owner create in its organization’s workspace', async () => {
    const res = await createAgent({ title: 'Via org key' }, MKEYS.acmeOrg);
    expect(res.statusCode).toBe(201);
  });
});

describe(`GET /v1/agents/{id} (${engineName})`, () => {
  it('shows a setup-managed agent with managedBy setup', async () => {
    const res = await call('GET', '/v1/agents/agt_file', MKEYS.owner);
    expect(res.statusCode).toBe(200);
    expect(res.json().data.agent).toMatchObject({
      id: 'agt_file',
      instructions: 'Declared in the file.',
      managedBy: 'setup',
    });
  });

  it('shows a private agent to owners, admins and an owner’s organization key, not to members', async () => {
    for (const key of [MKEYS.owner, MKEYS.admin, MKEYS.acmeOrg]) {
      expect((await call('GET', '/v1/agents/agt_private', key)).statusCode).toBe(200);
    }
    for (const key of [MKEYS.member, MKEYS.acmeOrgMember]) {
      const res = await call('GET', '/v1/agents/agt_private', key);
      expect(res.statusCode).toBe(404);
    }
  });

  it('lets only owners and admins talk to a private agent: chat, runs, run history and the OpenAI door are 404 to members', async () => {
    // What a key gets from each way of using the agent: chat, run, run history, the OpenAI door.
    const statuses = async (key: string) => [
      (
        await call('POST', '/v1/chat', key, {
          agentId: 'agt_private',
          stream: false,
          messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
        })
      ).statusCode,
      (await call('POST', '/v1/agents/agt_private/runs', key, { message: 'hi' })).statusCode,
      (await call('GET', '/v1/agents/agt_private/runs', key)).statusCode,
      (
        await call('POST', '/v1/openai/chat/completions', key, {
          model: 'agt_private',
          messages: [{ role: 'user', content: 'hi' }],
        })
      ).statusCode,
    ];
    for (const key of [MKEYS.member, MKEYS.acmeOrgMember])
      expect(await statuses(key)).toEqual([404, 404, 404, 404]);
    for (const key of [MKEYS.owner, MKEYS.admin]) expect(await statuses(key)).toEqual([200, 200, 200, 200]);
  });

  it('answers 404 across tenants and for unknown ids', async () => {
    for (const [key, id] of [
      [MKEYS.globexWorkspace, 'agt_file'],
      [MKEYS.otherWorkspace, 'agt_file'],
      [MKEYS.owner, 'agt_nope'],
      [MKEYS.globexOrg, 'agt_listed'],
    ]) {
      const res = await call('GET', `/v1/agents/${id}`, key!);
      expect(res.statusCode).toBe(404);
      expect(res.json().code).toBe('not_found');
    }
  });

  it('answers 400 for an over-long id', async () => {
    expect((await call('GET', `/v1/agents/${'a'.repeat(201)}`, MKEYS.owner)).statusCode).toBe(400);
  });
});

describe(`PATCH and DELETE /v1/agents/{id} (${engineName})`, () => {
  // Every field of a PATCH may be null (clear): a value that is neither failed the null branch too,
  // and the issues said "must be null" and "must match a schema in anyOf" beside the real problem.
  it('says only what is wrong with a value sent for a clearable field, at its path, without the null branch', async () => {
    const url = `/v1/agents/${(await createAgent({ title: 'Clearable' })).json().data.agent.id}`;
    const cases = [
      [{ tools: [{ type: 'mcp', url: 5 }] }, 'body.tools.0.name', 'is required'],
      // The one value it takes, not "must be equal to constant".
      [{ tools: [{ type: 'sse', name: 'a', url: 'https://a.test/' }] }, 'body.tools.0.type', 'must be "mcp"'],
      [{ tools: [{ type: 'mcp', name: 'a', url: 5 }] }, 'body.tools.0.url', 'must be string'],
      [
        { tools: [{ type: 'mcp', name: 'a', url: 'not a url' }] },
        'body.tools.0.url',
        'must match format "uri"',
      ],
      [{ tools: ['x'] }, 'body.tools.0', 'must be object'],
      [{ tools: 'x' }, 'body.tools', 'must be array or null'],
      [{ orchestration: { agents: [5] } }, 'body.orchestration.agents.0', 'must be string'],
      [{ description: 5 }, 'body.description', 'must be string or null'],
      // A union of literals inside the nullable one: its shapes once (not "string" for each literal).
      [{ visibility: 5 }, 'body.visibility', 'must be "workspace", "organization", "private" or null'],
      [{ visibility: 'x' }, 'body.visibility', 'must be "workspace", "organization", "private" or null'],
    ] as const;
    for (const [body, path, message] of cases) {
      const res = await call('PATCH', url, MKEYS.owner, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json(), JSON.stringify(body)).toEqual({
        code: 'bad_request',
        message: `${path} ${message}`,
        details: { issues: [{ path, message }] },
      });
    }
  });

  it('merge-patches: absent fields stay, null clears, masked headers keep their value', async () => {
    const created = (
      await createAgent({
        title: 'Patchable',
        description: 'before',
        category: 'c',
        model: 'local/small',
        tools: [
          {
            type: 'mcp',
            name: 'crm',
            url: 'https://mcp.example.test/',
            headers: { authorization: 'Bearer keep' },
          },
        ],
      })
    ).json().data.agent;
    const read = (await call('GET', `/v1/agents/${created.id}`, MKEYS.owner)).json().data.agent;
    const res = await call('PATCH', `/v1/agents/${created.id}`, MKEYS.admin, {
      description: 'after',
      category: null,
      model: null,
      tools: read.tools,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.agent).toMatchObject({
      title: 'Patchable',
      description: 'after',
      category: '',
      model: 'atrium/echo',
      managedBy: 'api',
    });
    const row = await t.env.database.db
      .selectFrom('agents')
      .selectAll()
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    expect(JSON.parse(row.tools)[0].headers.authorization).toBe('Bearer keep');
    expect(row.model).toBeNull();
    // The mask keeps a secret only for the same tool at the same URL: sent with another URL it
    // would hand the secret to a server of the sender's choosing (400, nothing changed).
    for (const tool of [
      { ...read.tools[0], url: 'https://attacker.example/mcp' },
      { ...read.tools[0], name: 'other' },
      { ...read.tools[0], headers: { 'x-new': '***' } },
    ]) {
      const moved = await call('PATCH', `/v1/agents/${created.id}`, MKEYS.admin, { tools: [tool] });
      expect(moved.statusCode, JSON.stringify(tool)).toBe(400);
      expect(moved.json().code).toBe('bad_request');
    }
    const after = await t.env.database.db
      .selectFrom('agents')
      .select('tools')
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    expect(JSON.parse(after.tools)[0]).toMatchObject({
      url: 'https://mcp.example.test/',
      headers: { authorization: 'Bearer keep' },
    });
  });

  it('keeps a title stored before the one-line rule when a PATCH sends it back unchanged, and refuses a new one breaking the rule', async () => {
    const id = (await createAgent({ title: 'Legacy' })).json().data.agent.id as string;
    // As stored before titles had to be one line with a character that shows.
    const legacy = 'Legacy\tagent';
    await t.env.database.db.updateTable('agents').set({ title: legacy }).where('id', '=', id).execute();
    const read = (await call('GET', `/v1/agents/${id}`, MKEYS.owner)).json().data.agent;
    const { id: _id, managedBy: _managedBy, createdAt: _createdAt, updatedAt: _updatedAt, ...fields } = read;
    const written = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, {
      ...fields,
      description: 'rewritten',
    });
    expect(written.statusCode).toBe(200);
    expect(written.json().data.agent).toMatchObject({ title: legacy, description: 'rewritten' });
    const message =
      'must show a character and be one line: no control characters (newlines, tabs) or line separators (U+2028, U+2029)';
    for (const title of ['Legacy\tagent ', 'Other\tagent', 'a\u2028b', '\u3164', '\u0301']) {
      const res = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, { title });
      expect(res.statusCode, JSON.stringify(title)).toBe(400);
      expect(res.json(), JSON.stringify(title)).toEqual({
        code: 'bad_request',
        message: `body.title ${message}`,
        details: { issues: [{ path: 'body.title', message }] },
      });
    }
    const renamed = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, {
      title: 'Legacy re\u0301sume\u0301',
    });
    expect(renamed.json().data.agent.title).toBe('Legacy re\u0301sume\u0301');
  });

  // Many MCP servers take their credential in the URL (`?api_key=…`, `user:secret@host`): a
  // reader of the agent sees it masked, as header values are, and sends it back masked.
  const SECRET_URL = 'https://svc:s3cret@mcp.example.test/sse?api_key=abc123&a%20b=c+d&flag&empty=';
  const MASKED_URL = 'https://***:***@mcp.example.test/sse?api_key=***&a%20b=***&flag&empty=';
  const storedTools = async (id: string) =>
    JSON.parse(
      (
        await t.env.database.db
          .selectFrom('agents')
          .select('tools')
          .where('id', '=', id)
          .executeTakeFirstOrThrow()
      ).tools,
    );

  /**
   * Creates an agent `title` with MCP tools at `urls` and checks that create and every key's read show
   * them as `shown`, never holding any of `hidden`; answers the agent's id.
   */
  async function expectToolUrlsShown(
    title: string,
    urls: string[],
    shown: string[],
    hidden: string[],
  ): Promise<string> {
    const created = await createAgent({
      title,
      tools: urls.map((url, i) => ({ type: 'mcp', name: `tool${i}`, url })),
    });
    expect(created.statusCode).toBe(201);
    const id = created.json().data.agent.id as string;
    expect(created.json().data.agent.tools.map((tool: { url: string }) => tool.url)).toEqual(shown);
    for (const key of [MKEYS.owner, MKEYS.admin, MKEYS.member]) {
      const read = await call('GET', `/v1/agents/${id}`, key);
      expect(read.json().data.agent.tools.map((tool: { url: string }) => tool.url)).toEqual(shown);
      for (const secret of hidden) expect(read.body).not.toContain(secret);
    }
    return id;
  }

  /** Creates an agent `title` with the one MCP `tool`; answers its id. */
  async function agentWithTool(title: string, tool: Record<string, unknown>): Promise<string> {
    const created = await createAgent({ title, tools: [tool] });
    expect(created.statusCode).toBe(201);
    return created.json().data.agent.id as string;
  }

  it('shows an MCP url’s password and query values as *** to admins and members, and a url without them as stored', async () => {
    const id = await expectToolUrlsShown(
      'Url secrets',
      [SECRET_URL, 'https://mcp.example.test/plain#part', 'https://mcp.example.test'],
      [MASKED_URL, 'https://mcp.example.test/plain#part', 'https://mcp.example.test'],
      ['s3cret', 'abc123'],
    );
    expect((await storedTools(id))[0].url).toBe(SECRET_URL);
  });

  it('keeps the stored url and headers of a tool sent back as read, under the same name', async () => {
    const id = await agentWithTool('Url round trip', {
      type: 'mcp',
      name: 'crm',
      url: SECRET_URL,
      headers: { authorization: 'Bearer keep' },
    });
    const read = (await call('GET', `/v1/agents/${id}`, MKEYS.admin)).json().data.agent;
    const res = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, {
      description: 'changed',
      tools: read.tools,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.agent.tools).toEqual(read.tools);
    expect(await storedTools(id)).toEqual([
      { type: 'mcp', name: 'crm', url: SECRET_URL, headers: { authorization: 'Bearer keep' } },
    ]);
    // A new url replaces the stored one, secrets and all.
    const replaced = 'https://mcp.example.test/sse?api_key=new';
    const moved = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, {
      tools: [{ type: 'mcp', name: 'crm', url: replaced }],
    });
    expect(moved.statusCode).toBe(200);
    expect((await storedTools(id))[0].url).toBe(replaced);
  });

  it('refuses a masked url that is no stored tool’s of that name with 400 at its url, and changes nothing', async () => {
    const id = await agentWithTool('Url masked elsewhere', { type: 'mcp', name: 'crm', url: SECRET_URL });
    const message =
      'has "***" where the url as read hides a secret, which keeps the stored url only for a tool of the same name whose url reads so: send the full url';
    // Under another name, at another host or with one value changed, the mask would hand the
    // stored secret to a server or tool of the sender's choosing.
    for (const tool of [
      { type: 'mcp', name: 'other', url: MASKED_URL },
      { type: 'mcp', name: 'crm', url: 'https://attacker.example/sse?api_key=***&a%20b=***&flag&empty=' },
      { type: 'mcp', name: 'crm', url: 'https://***:***@mcp.example.test/sse?api_key=***' },
    ]) {
      const res = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, {
        tools: [{ type: 'mcp', name: 'plain', url: 'https://mcp.example.test/' }, tool],
      });
      expect(res.statusCode, tool.url).toBe(400);
      expect(res.json(), tool.url).toEqual({
        code: 'bad_request',
        message: `body.tools.1.url ${message}`,
        details: { issues: [{ path: 'body.tools.1.url', message }] },
      });
    }
    expect((await storedTools(id))[0].url).toBe(SECRET_URL);
    // A new agent has no stored url for the mask to stand for.
    const copied = await createAgent({
      title: 'Url copy',
      tools: [{ type: 'mcp', name: 'crm', url: MASKED_URL }],
    });
    expect(copied.statusCode).toBe(400);
    expect(copied.json().details.issues).toEqual([{ path: 'body.tools.0.url', message }]);
  });

  it('refuses a masked header value on create: nothing is stored for it to stand for', async () => {
    // Before: an agent read and posted as a new one stored the literal "***" as its credential.
    const copied = await createAgent({
      title: 'Header copy',
      tools: [
        { type: 'mcp', name: 'crm', url: 'https://mcp.example.test/', headers: { authorization: '***' } },
      ],
    });
    expect(copied.statusCode).toBe(400);
    const message =
      'is "***", which keeps a stored value only for the same tool name and url: send the value';
    expect(copied.json()).toEqual({
      code: 'bad_request',
      message: `body.tools.0.headers.authorization ${message}`,
      details: { issues: [{ path: 'body.tools.0.headers.authorization', message }] },
    });
  });

  // Token-in-userinfo servers (`https://ghp_…@host/mcp`) take the credential as the user name.
  const TOKEN_URL = 'https://ghp_secrettoken@mcp.example.test/mcp';
  const MASKED_TOKEN_URL = 'https://***@mcp.example.test/mcp';
  const MASKED_URL_PROBLEM =
    'has "***" where the url as read hides a secret, which keeps the stored url only for a tool of the same name whose url reads so: send the full url';

  it('shows a url’s whole userinfo as ***, the user name with a password or without one', async () => {
    // GitHub's documented form puts the token in the user name, beside a password that is none.
    await expectToolUrlsShown(
      'Url user names',
      [
        TOKEN_URL,
        'https://user:@mcp.example.test/plain#part',
        'https://svc:s3cret@mcp.example.test/',
        'https://ghp_tokenasuser:x-oauth-basic@mcp.example.test/mcp',
        'https://oauth2:glpat-tokenaspassword@mcp.example.test/mcp',
        'https://:onlypassword@mcp.example.test/mcp',
      ],
      [
        MASKED_TOKEN_URL,
        'https://***@mcp.example.test/plain#part',
        'https://***:***@mcp.example.test/',
        'https://***:***@mcp.example.test/mcp',
        'https://***:***@mcp.example.test/mcp',
        'https://***:***@mcp.example.test/mcp',
      ],
      [
        'ghp_secrettoken',
        's3cret',
        'ghp_tokenasuser',
        'x-oauth-basic',
        'glpat-tokenaspassword',
        'onlypassword',
        'svc',
      ],
    );
  });

  it('keeps a stored user name and password sent back as ***:***, and takes new real ones in their place', async () => {
    const stored = 'https://ghp_tokenasuser:x-oauth-basic@mcp.example.test/mcp';
    const id = await agentWithTool('Url userinfo round trip', {
      type: 'mcp',
      name: 'gh',
      url: stored,
      headers: { 'x-extra': 'kept' },
    });
    const read = (await call('GET', `/v1/agents/${id}`, MKEYS.admin)).json().data.agent;
    expect(read.tools[0].url).toBe('https://***:***@mcp.example.test/mcp');
    const res = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, {
      description: 'rw',
      tools: read.tools,
    });
    expect(res.statusCode).toBe(200);
    expect(await storedTools(id)).toEqual([
      { type: 'mcp', name: 'gh', url: stored, headers: { 'x-extra': 'kept' } },
    ]);
    // Half masked is no url as read: the stored credentials are kept only for the whole mask.
    for (const url of [
      'https://ghp_tokenasuser:***@mcp.example.test/mcp',
      'https://***:x-oauth-basic@mcp.example.test/mcp',
      'https://***@mcp.example.test/mcp',
    ]) {
      const refused = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, {
        tools: [{ type: 'mcp', name: 'gh', url }],
      });
      expect(refused.statusCode, url).toBe(400);
      expect(refused.json().details.issues, url).toEqual([
        { path: 'body.tools.0.url', message: MASKED_URL_PROBLEM },
      ]);
    }
    expect((await storedTools(id))[0].url).toBe(stored);
    const rotated = 'https://ghp_rotated:x-oauth-basic@mcp.example.test/mcp';
    const replaced = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, {
      tools: [{ type: 'mcp', name: 'gh', url: rotated }],
    });
    expect(replaced.statusCode).toBe(200);
    expect(replaced.json().data.agent.tools[0].url).toBe('https://***:***@mcp.example.test/mcp');
    expect((await storedTools(id))[0].url).toBe(rotated);
  });

  it('refuses a url whose user name holds a colon, which Basic authentication cannot send, at its url', async () => {
    const message =
      'has a user name holding ":" once percent-decoded, which Basic authentication cannot send (its first ":" ends the user name): put the credential in an Authorization header instead';
    const id = await agentWithTool('Url colon user', { type: 'mcp', name: 'ok', url: TOKEN_URL });
    for (const [i, url] of [
      'https://a%3Ab:pw@mcp.example.test/mcp',
      'https://tok%3aen@mcp.example.test/mcp',
    ].entries()) {
      const created = await createAgent({ title: `Colon ${i}`, tools: [{ type: 'mcp', name: 'c', url }] });
      const patched = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, {
        tools: [
          { type: 'mcp', name: 'ok', url: MASKED_TOKEN_URL },
          { type: 'mcp', name: 'c', url },
        ],
      });
      for (const [res, path] of [
        [created, 'body.tools.0.url'],
        [patched, 'body.tools.1.url'],
      ] as const) {
        expect(res.statusCode, url).toBe(400);
        expect(res.json(), url).toEqual({
          code: 'bad_request',
          message: `${path} ${message}`,
          details: { issues: [{ path, message }] },
        });
      }
    }
    expect(await storedTools(id)).toEqual([{ type: 'mcp', name: 'ok', url: TOKEN_URL }]);
    // A colon in the password is sent as it is: Basic splits at the first one only.
    const inPassword = 'https://user:pa%3Ass:word@mcp.example.test/mcp';
    expect(
      (
        await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, {
          tools: [{ type: 'mcp', name: 'c', url: inPassword }],
        })
      ).statusCode,
    ).toBe(200);
  });

  it('keeps the stored url of a tool whose user name is sent back as ***, and refuses it elsewhere', async () => {
    const id = await agentWithTool('Url token round trip', { type: 'mcp', name: 'gh', url: TOKEN_URL });
    const read = (await call('GET', `/v1/agents/${id}`, MKEYS.admin)).json().data.agent;
    const res = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, { tools: read.tools });
    expect(res.statusCode).toBe(200);
    expect((await storedTools(id))[0].url).toBe(TOKEN_URL);
    // Under another name or at another host the mask would hand the token to a tool or server of
    // the sender's choosing; a new agent has no token for it to stand for.
    for (const tool of [
      { type: 'mcp', name: 'other', url: MASKED_TOKEN_URL },
      { type: 'mcp', name: 'gh', url: 'https://***@attacker.example/mcp' },
      { type: 'mcp', name: 'gh', url: 'https://***:pw@mcp.example.test/mcp' },
    ]) {
      const refused = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, { tools: [tool] });
      expect(refused.statusCode, tool.url).toBe(400);
      expect(refused.json(), tool.url).toEqual({
        code: 'bad_request',
        message: `body.tools.0.url ${MASKED_URL_PROBLEM}`,
        details: { issues: [{ path: 'body.tools.0.url', message: MASKED_URL_PROBLEM }] },
      });
    }
    expect((await storedTools(id))[0].url).toBe(TOKEN_URL);
    const copied = await createAgent({
      title: 'Url token copy',
      tools: [{ type: 'mcp', name: 'gh', url: MASKED_TOKEN_URL }],
    });
    expect(copied.statusCode).toBe(400);
    expect(copied.json().details.issues).toEqual([{ path: 'body.tools.0.url', message: MASKED_URL_PROBLEM }]);
  });

  it('stores a literal *** user name sent percent-encoded, and shows it masked like any other', async () => {
    // URL parsing keeps %2A%2A%2A as spelled (it does not decode userinfo), so it is no mask.
    const literal = 'https://%2A%2A%2A@mcp.example.test/mcp';
    const created = await createAgent({
      title: 'Url literal stars',
      tools: [{ type: 'mcp', name: 'stars', url: literal }],
    });
    expect(created.statusCode).toBe(201);
    const id = created.json().data.agent.id;
    expect((await storedTools(id))[0].url).toBe(literal);
    expect(created.json().data.agent.tools[0].url).toBe(MASKED_TOKEN_URL);
    const read = (await call('GET', `/v1/agents/${id}`, MKEYS.admin)).json().data.agent;
    expect((await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, { tools: read.tools })).statusCode).toBe(
      200,
    );
    expect((await storedTools(id))[0].url).toBe(literal);
    // On PATCH too, at a new host: stored as sent.
    const moved = 'https://%2A%2A%2A@other.example.test/mcp';
    const res = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, {
      tools: [{ type: 'mcp', name: 'stars', url: moved }],
    });
    expect(res.statusCode).toBe(200);
    expect((await storedTools(id))[0].url).toBe(moved);
  });

  /** An MCP url of exactly `length` characters whose every query value is one character. */
  const urlOfLength = (length: number) => {
    const base = 'https://mcp.example.test/mcp?';
    const pairs = Math.floor((length - base.length) / 4);
    const url = `${base}${Array.from({ length: pairs }, () => 'k=1').join('&')}&`;
    return url.padEnd(length, 'x');
  };
  const URL_TOO_LONG =
    'is longer than the 2000 characters stored for a tool url (its masked parts counted as stored): send a shorter url';

  it('takes back a url as read that is longer than its stored url of 2000 characters', async () => {
    const stored = urlOfLength(2000);
    expect(stored).toHaveLength(2000);
    const created = await createAgent({
      title: 'Url near limit',
      tools: [{ type: 'mcp', name: 'long', url: stored }],
    });
    expect(created.statusCode).toBe(201);
    const id = created.json().data.agent.id;
    const read = (await call('GET', `/v1/agents/${id}`, MKEYS.admin)).json().data.agent;
    // Each `k=1` reads `k=***`: the url as read is longer than the stored one.
    expect(read.tools[0].url.length).toBeGreaterThan(2000);
    const res = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, {
      description: 'rw',
      tools: read.tools,
    });
    expect(res.statusCode).toBe(200);
    expect((await storedTools(id))[0].url).toBe(stored);
  });

  it('refuses a url that would be stored longer than 2000 characters, and one sent longer than 8000, at its url', async () => {
    const id = (await createAgent({ title: 'Url over limit' })).json().data.agent.id;
    const over = urlOfLength(2001);
    const created = await createAgent({
      title: 'Url over limit on create',
      tools: [{ type: 'mcp', name: 'long', url: over }],
    });
    const patched = await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, {
      tools: [
        { type: 'mcp', name: 'ok', url: 'https://mcp.example.test/' },
        { type: 'mcp', name: 'long', url: over },
      ],
    });
    for (const [res, path] of [
      [created, 'body.tools.0.url'],
      [patched, 'body.tools.1.url'],
    ] as const) {
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        code: 'bad_request',
        message: `${path} ${URL_TOO_LONG}`,
        details: { issues: [{ path, message: URL_TOO_LONG }] },
      });
    }
    expect(await storedTools(id)).toEqual([]);
    // Past 8000 characters even a url as read is refused, by the schema.
    const huge = [{ type: 'mcp', name: 'huge', url: urlOfLength(8001) }];
    for (const res of [
      await call('PATCH', `/v1/agents/${id}`, MKEYS.admin, { tools: huge }),
      await createAgent({ title: 'Url huge', tools: huge }),
    ]) {
      expect(res.statusCode).toBe(400);
      expect(res.json().details.issues).toContainEqual({
        path: 'body.tools.0.url',
        message: 'must NOT have more than 8000 characters',
      });
    }
  });

  it('lists a renamed agent by its new title, case-insensitively', async () => {
    const first = (await createAgent({ title: 'Öa' })).json().data.agent;
    expect((await createAgent({ title: 'öb' })).statusCode).toBe(201);
    const renamed = await call('PATCH', `/v1/agents/${first.id}`, MKEYS.owner, { title: 'Öc' });
    expect(renamed.statusCode).toBe(200);
    const res = await call('GET', '/v1/workspace/wsp_main/agents?limit=100', MKEYS.owner);
    const titles = (res.json().data.agents as Array<{ title: string }>).map((a) => a.title);
    expect(titles.filter((x) => /^[öÖ]/.test(x))).toEqual(['öb', 'Öc']);
  });

  it('accepts application/merge-patch+json', async () => {
    const created = (await createAgent({ title: 'Merge type' })).json().data.agent;
    const res = await t.app.inject({
      method: 'PATCH',
      url: `/v1/agents/${created.id}`,
      headers: { 'x-service-api-key': MKEYS.owner, 'content-type': 'application/merge-patch+json' },
      payload: JSON.stringify({ category: 'merged' }),
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.agent.category).toBe('merged');
  });

  it('holds application/merge-patch+json bodies to the checks of every JSON body', async () => {
    const created = (await createAgent({ title: 'Merge checks' })).json().data.agent;
    const patch = (payload: Buffer | string) =>
      t.app.inject({
        method: 'PATCH',
        url: `/v1/agents/${created.id}`,
        headers: { 'x-service-api-key': MKEYS.owner, 'content-type': 'application/merge-patch+json' },
        payload,
      });
    // Before: 200, with U+FFFD stored in place of the byte.
    const invalidUtf8 = await patch(
      Buffer.concat([Buffer.from('{"description":"a'), Buffer.from([0xff]), Buffer.from('b"}')]),
    );
    expect(invalidUtf8.statusCode).toBe(400);
    expect(invalidUtf8.json().message).toBe('The JSON body is not valid UTF-8');
    // Before: parsed whole (the unknown field then dropped).
    const many = await patch(
      `{"x":[${Array(MAX_JSON_CONTAINERS + 1)
        .fill('{}')
        .join(',')}]}`,
    );
    expect(many.statusCode).toBe(400);
    expect(many.json().message).toContain('objects and arrays');
    const stored = await t.db
      .selectFrom('agents')
      .select('description')
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    expect(stored.description).toBe('');
  });

  it('refuses a title taken by another agent, a null title and an unenabled model', async () => {
    const created = (await createAgent({ title: 'Renamable' })).json().data.agent;
    expect(
      (await call('PATCH', `/v1/agents/${created.id}`, MKEYS.owner, { title: 'Listed' })).statusCode,
    ).toBe(409);
    expect((await call('PATCH', `/v1/agents/${created.id}`, MKEYS.owner, { title: null })).statusCode).toBe(
      400,
    );
    expect(
      (await call('PATCH', `/v1/agents/${created.id}`, MKEYS.owner, { model: 'local/large' })).statusCode,
    ).toBe(400);
    expect(
      (
        await call('PATCH', `/v1/agents/${created.id}`, MKEYS.owner, {
          orchestration: { agents: [created.id] },
        })
      ).statusCode,
    ).toBe(400);
  });

  it('renames at most one agent to a title when renames and a create race for it', async () => {
    const ids = await Promise.all(
      ['Rename A', 'Rename B', 'Rename C'].map(
        async (title) => (await createAgent({ title })).json().data.agent.id as string,
      ),
    );
    const answers = await Promise.all([
      ...ids.map((id) => call('PATCH', `/v1/agents/${id}`, MKEYS.owner, { title: 'Renamed twin' })),
      createAgent({ title: 'Renamed twin' }),
    ]);
    // Whichever wins (a rename answers 200, the create 201), the other three answer 409.
    const statuses = answers.map((res) => (res.statusCode === 201 ? 200 : res.statusCode));
    expect(statuses.sort()).toEqual([200, 409, 409, 409]);
    expect(await agentIdsTitled('Renamed twin')).toHaveLength(1);
  });

  it('answers 409 managed_by_setup for writes to a setup-file agent, and leaves it unchanged', async () => {
    const patch = await call('PATCH', '/v1/agents/agt_file', MKEYS.owner, { description: 'changed' });
    expect(patch.statusCode).toBe(409);
    expect(patch.json()).toEqual({
      code: 'managed_by_setup',
      message: expect.any(String),
      details: { managedBy: 'setup' },
    });
    const del = await call('DELETE', '/v1/agents/agt_file', MKEYS.owner);
    expect(del.statusCode).toBe(409);
    const row = await t.env.database.db
      .selectFrom('agents')
      .selectAll()
      .where('id', '=', 'agt_file')
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ description: '', deleted_at: null });
  });

  it('refuses writes by a member (401) and across tenants (404)', async () => {
    const created = (await createAgent({ title: 'Guarded' })).json().data.agent;
    const member = await call('PATCH', `/v1/agents/${created.id}`, MKEYS.member, { description: 'x' });
    expect(member.statusCode).toBe(401);
    expect(member.json().code).toBe('unauthorized');
    expect((await call('DELETE', `/v1/agents/${created.id}`, MKEYS.member)).statusCode).toBe(401);
    expect(
      (await call('PATCH', `/v1/agents/${created.id}`, MKEYS.globexWorkspace, { description: 'x' }))
        .statusCode,
    ).toBe(404);
    expect((await call('DELETE', `/v1/agents/${created.id}`, MKEYS.otherWorkspace)).statusCode).toBe(404);
  });

  it('soft-deletes: gone from reads, lists and chats; a second delete is 404', async () => {
    const created = (await createAgent({ title: 'Doomed' })).json().data.agent;
    const del = await call('DELETE', `/v1/agents/${created.id}`, MKEYS.owner);
    expect(del.statusCode).toBe(200);
    expect(del.json()).toEqual({ data: { deleted: true } });
    expect((await call('GET', `/v1/agents/${created.id}`, MKEYS.owner)).statusCode).toBe(404);
    const list = await call('GET', '/v1/workspace/wsp_main/agents', MKEYS.owner);
    expect(list.json().data.agents.map((a: { id: string }) => a.id)).not.toContain(created.id);
    const chat = await call('POST', '/v1/chat', MKEYS.owner, {
      agentId: created.id,
      messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
    });
    expect(chat.statusCode).toBe(404);
    expect((await call('DELETE', `/v1/agents/${created.id}`, MKEYS.owner)).statusCode).toBe(404);
    const row = await t.env.database.db
      .selectFrom('agents')
      .select('deleted_at')
      .where('id', '=', created.id)
      .executeTakeFirst();
    expect(row?.deleted_at).toBe(now.toISOString());
  });
});
