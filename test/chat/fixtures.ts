import { afterAll, beforeAll } from 'vitest';
import type { Db } from '../../src/db/database.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { startRawMcpServer } from './raw-mcp-server.js';

export const CHAT_KEYS = {
  main: 'atr_ws_fixture_chat_main_owner_000000000000000',
  mainMember: 'atr_ws_fixture_chat_main_member_00000000000000',
  mainAdmin: 'atr_ws_fixture_chat_main_admin_000000000000000',
  other: 'atr_ws_fixture_chat_other_ws_0000000000000000',
  limited: 'atr_ws_fixture_chat_limited_ws_00000000000000',
  capped: 'atr_ws_fixture_chat_capped_ws_000000000000000',
  org: 'atr_org_fixture_chat_acme_0000000000000000000',
} as const;

export const UPSTREAM_KEY = 'sk-fake-upstream-key-000000000000000000000000';

/** A closed port: connecting there is refused at once. */
export const DEAD_MCP_URL = 'http://127.0.0.1:9/mcp';

/**
 * One organization with a workspace on the fake upstream (two priced models and the echo
 * model), a workspace of another tenant, and two workspaces with limits.
 */
export function chatSetup(upstream: FakeUpstream, extra: { mcpUrl?: string } = {}) {
  return `
providers:
  - id: fake
    type: openai-compatible
    baseURL: ${upstream.baseURL}
    apiKey: "${UPSTREAM_KEY}"
models:
  - { id: fake-small, provider: fake, model: small-1, pricing: { inputPerMTok: 1, outputPerMTok: 2 } }
  - { id: fake-large, provider: fake, model: large-1, pricing: { inputPerMTok: 10, outputPerMTok: 20 } }
  - { id: fake-disabled, provider: fake, model: disabled-1 }
organizations:
  - id: org_acme
    name: Acme
    users:
      - { id: usr_olivia, name: Olivia, email: olivia@acme.test }
      - { id: usr_max, name: Max, email: max@acme.test }
      - { id: usr_ada, name: Ada, email: ada@acme.test }
    apiKeys:
      - { name: acme-org, user: usr_olivia, key: "${CHAT_KEYS.org}" }
    workspaces:
      - id: wsp_main
        name: Main
        models: [fake-small, fake-large, atrium/echo]
        defaultModel: fake-small
        members:
          - { user: usr_olivia, role: owner }
          - { user: usr_max, role: member }
          - { user: usr_ada, role: admin }
        apiKeys:
          - { name: main-owner, user: usr_olivia, key: "${CHAT_KEYS.main}" }
          - { name: main-member, user: usr_max, key: "${CHAT_KEYS.mainMember}" }
          - { name: main-admin, user: usr_ada, key: "${CHAT_KEYS.mainAdmin}" }
        agents:
          - id: agt_helper
            title: Helper
            description: Answers questions
            instructions: "You help {{user.name}} ({{user.email}}, {{user.id}}) at {{company}}. Tier {{tier}}, beta {{beta}}. Keep {{unknown}} as is."
          - { id: agt_plain, title: Plain }
          - { id: agt_echo, title: Echo, model: atrium/echo, instructions: "Be an echo." }
          - id: agt_tools
            title: Tools
            tools:
              - { type: mcp, name: search, url: ${DEAD_MCP_URL} }
${extra.mcpUrl ? `              - { type: mcp, name: live, url: ${extra.mcpUrl} }` : ''}
          - id: agt_lead
            title: Lead
            instructions: Delegate.
            orchestration: { agents: [agt_plain, agt_gone] }
          - { id: agt_gone, title: Gone, deleted: true }
        projects:
          - { id: prj_docs, name: Docs, instructions: "Cite file names.", memory: "The launch is on Monday." }
          - { id: prj_empty, name: Empty }
      - id: wsp_other
        name: Other
        models: [fake-small]
        defaultModel: fake-small
        members:
          - { user: usr_olivia, role: owner }
        apiKeys:
          - { name: other-owner, user: usr_olivia, key: "${CHAT_KEYS.other}" }
        agents:
          - { id: agt_other, title: Other agent }
        projects:
          - { id: prj_other, name: Other project }
      - id: wsp_limited
        name: Limited
        models: [fake-small]
        defaultModel: fake-small
        limits: { monthlyTokens: 100, monthlyCostUsd: 0.5 }
        members:
          - { user: usr_olivia, role: owner }
        apiKeys:
          - { name: limited-owner, user: usr_olivia, key: "${CHAT_KEYS.limited}" }
        agents:
          - { id: agt_limited, title: Limited agent }
      - id: wsp_capped
        name: Capped
        models: [fake-large]
        defaultModel: fake-large
        limits: { chatSpendCapUsd: 0.001 }
        members:
          - { user: usr_olivia, role: owner }
        apiKeys:
          - { name: capped-owner, user: usr_olivia, key: "${CHAT_KEYS.capped}" }
        agents:
          - { id: agt_capped, title: Capped agent }
`;
}

export function userText(text: string, id?: string) {
  return { ...(id ? { id } : {}), role: 'user' as const, parts: [{ type: 'text', text }] };
}

export async function chatRows(db: Db, chatId: string) {
  return db.selectFrom('messages').selectAll().where('chat_id', '=', chatId).orderBy('position').execute();
}

/** The month's usage ledger of a workspace (`wsp_main` unless named): tokens charged so far. */
export async function ledgerTokens(db: Db, workspaceId = 'wsp_main') {
  const row = await db
    .selectFrom('usage_ledger')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
  return { inputTokens: Number(row?.input_tokens ?? 0), outputTokens: Number(row?.output_tokens ?? 0) };
}

export async function countRows(db: Db) {
  const [chats, messages, runs, ledger] = await Promise.all([
    db
      .selectFrom('chats')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow(),
    db
      .selectFrom('messages')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow(),
    db
      .selectFrom('agent_runs')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow(),
    db
      .selectFrom('usage_ledger')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow(),
  ]);
  return {
    chats: Number(chats.n),
    messages: Number(messages.n),
    runs: Number(runs.n),
    ledger: Number(ledger.n),
  };
}

/**
 * A fake upstream and a test app on the chat fixture for a test file: started before its tests
 * (handed to `started`, which keeps them in the file's variables), closed after them.
 */
/** What a chat test app may add: an MCP server of its own (raw-mcp-server.ts). */
export interface ChatAppOptions {
  mcp?: Parameters<typeof startRawMcpServer>[0];
  mcpConnectTimeoutMs?: number;
  /** How long a stop waits for the stopped reply to be stored (default 10 s). */
  stopWaitMs?: number;
  /** Runs before anything closes: gates a test still holds open are released here. */
  beforeClose?: () => void;
}

type RawMcpServer = Awaited<ReturnType<typeof startRawMcpServer>>;

export function useChatApp(
  started: (app: { upstream: FakeUpstream; t: TestApp; mcp: RawMcpServer | undefined }) => void,
  options: ChatAppOptions = {},
): void {
  let upstream: FakeUpstream | undefined;
  let t: TestApp | undefined;
  let mcp: RawMcpServer | undefined;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
    if (options.mcp) mcp = await startRawMcpServer(options.mcp);
    t = await createTestApp({
      setup: chatSetup(upstream),
      mcpConnectTimeoutMs: options.mcpConnectTimeoutMs,
      stopWaitMs: options.stopWaitMs,
    });
    started({ upstream, t, mcp });
  });
  afterAll(async () => {
    options.beforeClose?.();
    await t?.close();
    await upstream?.close();
    await mcp?.close();
  });
}

/** Gives an agent one MCP server (its tools replaced), as an admin's edit would. */
export async function giveAgentMcpServer(db: Db, agentId: string, url: string): Promise<void> {
  await db
    .updateTable('agents')
    .set({ tools: JSON.stringify([{ type: 'mcp', name: 'srv', url }]) })
    .where('id', '=', agentId)
    .execute();
}

/** `POST /v1/chat` with the main workspace's key. */
export function postChat(t: TestApp, payload: Record<string, unknown>) {
  return t.app.inject({
    method: 'POST',
    url: '/v1/chat',
    headers: { 'x-service-api-key': CHAT_KEYS.main },
    payload,
  });
}
