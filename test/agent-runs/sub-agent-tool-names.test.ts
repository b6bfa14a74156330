/**
 * A sub-agent is offered to its lead as a tool named after its id (letters, digits, `_` and `-`,
 * at most 64 characters). Two ids that come out as one name (`agt.twin`, `agt:twin`; two long ids
 * alike in their first 64 characters), or an id that is the name of one of the lead's own tools
 * (`remember`, an MCP tool), made one tool silently replace the other: the model could reach only
 * one of the two, and a sub-agent named `remember` took the project's memory tool away. Now the
 * lead's own tools keep their names and each sub-agent, in the order configured, gets its name or,
 * when that is taken, the name with `_2`, `_3`, … ; the same names on every turn of a chat.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { startRawMcpServer } from '../chat/raw-mcp-server.js';
import { userText } from '../chat/fixtures.js';

const KEY = 'atr_ws_fixture_sub_agent_names_owner_00000000';
const LONG = `agt_${'x'.repeat(66)}`;
const LONG_A = `${LONG}a`;
const LONG_B = `${LONG}b`;

let upstream: FakeUpstream;
let mcp: Awaited<ReturnType<typeof startRawMcpServer>>;
let t: TestApp;

function setup() {
  return `
providers:
  - { id: fake, type: openai-compatible, baseURL: ${upstream.baseURL}, apiKey: sk-fake }
models:
  - { id: fake-small, provider: fake, model: small-1 }
organizations:
  - id: org_names
    name: Names
    users:
      - { id: usr_nora, name: Nora, email: nora@names.test }
    workspaces:
      - id: wsp_names
        name: Names
        models: [fake-small]
        defaultModel: fake-small
        members:
          - { user: usr_nora, role: owner }
        apiKeys:
          - { name: names-owner, user: usr_nora, key: "${KEY}" }
        agents:
          - id: agt_lead
            title: Lead
            tools:
              - { type: mcp, name: srv, url: ${mcp.url} }
            orchestration: { agents: ["agt.twin", "agt:twin", remember, srv_lookup, ${LONG_A}, ${LONG_B}] }
          - { id: "agt.twin", title: Twin dot }
          - { id: "agt:twin", title: Twin colon }
          - { id: remember, title: Rememberer }
          - { id: srv_lookup, title: Looker }
          - { id: ${LONG_A}, title: Long A }
          - { id: ${LONG_B}, title: Long B }
        projects:
          - { id: prj_names, name: Names }
`;
}

beforeAll(async () => {
  upstream = await startFakeUpstream();
  mcp = await startRawMcpServer({
    tools: [
      { name: 'lookup', description: 'Looks things up', inputSchema: { type: 'object', properties: {} } },
    ],
  });
  t = await createTestApp({ setup: setup() });
});
afterAll(async () => {
  await t.close();
  await upstream.close();
  await mcp.close();
});

/** Each sub-agent's expected tool name, in the order configured. */
const SUB_AGENT_NAMES: Record<string, string> = {
  'agt.twin': 'agt_twin',
  'agt:twin': 'agt_twin_2',
  remember: 'remember_2',
  srv_lookup: 'srv_lookup_2',
  [LONG_A]: LONG_A.slice(0, 64),
  [LONG_B]: `${LONG_B.slice(0, 62)}_2`,
};
const TITLES: Record<string, string> = {
  'agt.twin': 'Twin dot',
  'agt:twin': 'Twin colon',
  remember: 'Rememberer',
  srv_lookup: 'Looker',
  [LONG_A]: 'Long A',
  [LONG_B]: 'Long B',
};
const OWN_TOOLS = ['srv_lookup', 'remember', 'searchProjectFiles', 'readProjectFile'];

function offeredTools(requestIndex: number) {
  const tools = upstream.requests[requestIndex]!.body.tools ?? [];
  return Object.fromEntries(tools.map((tool) => [tool.function.name, tool.function.description ?? '']));
}

async function turn(text: string, chatId?: string) {
  const res = await t.app.inject({
    method: 'POST',
    url: '/v1/chat',
    headers: { 'x-service-api-key': KEY },
    payload: {
      agentId: 'agt_lead',
      projectId: 'prj_names',
      ...(chatId ? { chatId } : {}),
      messages: [userText(text)],
    },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { chatId: string; warnings?: unknown };
}

describe(`sub-agent tool names (${engineName})`, () => {
  let chatId: string;

  it('offers each sub-agent under a name of its own, and the own tools under theirs', async () => {
    upstream.requests.length = 0;
    upstream.enqueue({
      kind: 'tool-calls',
      calls: [
        ...Object.entries(SUB_AGENT_NAMES).map(([id, name]) => ({
          name,
          arguments: { message: `to ${id}` },
        })),
        { name: 'remember', arguments: { note: 'Twins are two.' } },
        { name: 'srv_lookup', arguments: {} },
      ],
    });
    const reply = await turn('Ask everyone');
    chatId = reply.chatId;
    expect(reply.warnings).toBeUndefined();

    const offered = offeredTools(0);
    expect(Object.keys(offered)).toEqual([...OWN_TOOLS, ...Object.values(SUB_AGENT_NAMES)]);
    // The model tells them apart by their descriptions: each names its own agent.
    for (const [id, name] of Object.entries(SUB_AGENT_NAMES)) {
      expect(offered[name]).toContain(`Ask the agent "${TITLES[id]}"`);
    }
    expect(offered['remember']).toContain("project's memory");
    expect(offered['srv_lookup']).toBe('Looks things up');

    // Each call reached the sub-agent its name stands for.
    const runs = await t.db
      .selectFrom('agent_runs')
      .select(['agent_id', 'input'])
      .where('chat_id', '=', chatId)
      .execute();
    expect(Object.fromEntries(runs.map((run) => [run.agent_id, run.input]))).toEqual(
      Object.fromEntries(Object.keys(SUB_AGENT_NAMES).map((id) => [id, `to ${id}`])),
    );
    // And the own tools are still the lead's: the note is saved, the MCP tool is called.
    const project = await t.db
      .selectFrom('projects')
      .select('memory')
      .where('id', '=', 'prj_names')
      .executeTakeFirstOrThrow();
    expect(project.memory).toContain('Twins are two.');
    expect(mcp.calls.map((call) => call.name)).toEqual(['lookup']);
  });

  it('offers the same names on the next turn of the chat, also once an earlier sub-agent is deleted', async () => {
    upstream.requests.length = 0;
    await turn('Again', chatId);
    expect(Object.keys(offeredTools(0))).toEqual([...OWN_TOOLS, ...Object.values(SUB_AGENT_NAMES)]);

    // `agt.twin` goes: `agt:twin` keeps `agt_twin_2`, the name the chat's earlier calls used.
    await t.db
      .updateTable('agents')
      .set({ deleted_at: new Date().toISOString() })
      .where('id', '=', 'agt.twin')
      .execute();
    upstream.requests.length = 0;
    upstream.enqueue({
      kind: 'tool-calls',
      calls: [{ name: 'agt_twin_2', arguments: { message: 'still you?' } }],
    });
    const reply = await turn('Once more', chatId);
    expect(reply.warnings).toEqual([
      expect.objectContaining({ tool: 'agt.twin', code: 'agent_unavailable' }),
    ]);
    expect(Object.keys(offeredTools(0))).toEqual([
      ...OWN_TOOLS,
      ...Object.entries(SUB_AGENT_NAMES)
        .filter(([id]) => id !== 'agt.twin')
        .map(([, name]) => name),
    ]);
    const run = await t.db
      .selectFrom('agent_runs')
      .select('agent_id')
      .where('chat_id', '=', chatId)
      .where('input', '=', 'still you?')
      .executeTakeFirstOrThrow();
    expect(run.agent_id).toBe('agt:twin');
  });
});
