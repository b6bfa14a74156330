import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { buildApp } from '../../src/app.js';
import { main } from '../../src/cli/main.js';
import { loadConfig } from '../../src/config.js';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.js';
import { engineName } from '../helpers/app.js';
import { createOwnDatabase } from '../helpers/own-database.js';
import { MANAGEMENT_SETUP, MKEYS } from './fixtures.js';

let dir: string;
let ownDatabase: Awaited<ReturnType<typeof createOwnDatabase>>;
let database: DatabaseHandle;
let app: Awaited<ReturnType<typeof buildApp>>;
const output = { out: [] as string[], err: [] as string[] };

function writeFile(name: string, text: string) {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) =>
  app.inject({
    method,
    url,
    headers: { 'x-service-api-key': MKEYS.owner },
    ...(payload !== undefined && { payload: payload as object }),
  });

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'atrium-ownership-'));
  process.env.ATRIUM_DATA_DIR = dir;
  process.env.LOG_LEVEL = 'silent';
  // The CLI reads DATABASE_URL like an operator's shell: a database of its own.
  ownDatabase = await createOwnDatabase('atrium_own');
  if (ownDatabase) process.env.DATABASE_URL = ownDatabase.url;
  vi.spyOn(console, 'log').mockImplementation(() => {});
  expect(await main(['apply', writeFile('setup.yaml', MANAGEMENT_SETUP)])).toBe(0);
  const config = loadConfig();
  database = await openDatabase(config.database);
  app = await buildApp({ config, db: database.db });
  await app.ready();
});
afterAll(async () => {
  await app?.close();
  await database?.close();
  rmSync(dir, { recursive: true, force: true });
  await ownDatabase?.drop();
});
beforeEach(() => {
  output.out = [];
  output.err = [];
  vi.spyOn(console, 'log').mockImplementation((...args) => void output.out.push(args.join(' ')));
  vi.spyOn(console, 'error').mockImplementation((...args) => void output.err.push(args.join(' ')));
});

const fileDeclaring = (agents: string) => `
organizations:
  - id: org_acme
    name: Acme
    workspaces:
      - id: wsp_main
        name: Main
        agents:
${agents}
`;

/** A setup file declaring one workspace key (a flow-style YAML map) of Max's in wsp_main. */
const keyFileFor = (name: string, key: string) =>
  writeFile(
    name,
    `
organizations:
  - id: org_acme
    name: Acme
    users: [{ id: usr_max, name: Max, email: max@acme.test }]
    workspaces:
      - id: wsp_main
        name: Main
        apiKeys:
          - { ${key} }
`,
  );

describe(`atrium apply and API-managed objects (${engineName})`, () => {
  it('refuses (exit 2) a file declaring an API-created agent, then --adopt takes it over', async () => {
    const created = await call('POST', '/v1/workspace/wsp_main/agents', {
      title: 'Made by API',
      description: 'api',
    });
    expect(created.statusCode).toBe(201);
    const agentId = created.json().data.agent.id;
    const file = writeFile(
      'adopt.yaml',
      fileDeclaring('          - { title: Made by API, description: from the file }'),
    );

    expect(await main(['apply', file])).toBe(2);
    expect(output.err.join('\n')).toContain(`agent "Made by API" (${agentId})`);
    expect(output.err.join('\n')).toContain('--adopt');
    expect(output.err).toEqual([
      `atrium: ${file}: nothing was applied: these objects are managed through the API:`,
      expect.stringMatching(/^atrium: {3}agent "Made by API" \(/),
      'atrium: Run again with --adopt to make the file their manager (API writes to them then answer 409).',
    ]);
    const untouched = (await call('GET', `/v1/agents/${agentId}`)).json().data.agent;
    expect(untouched).toMatchObject({ description: 'api', managedBy: 'api' });

    expect(await main(['apply', '--adopt', file])).toBe(0);
    const adopted = (await call('GET', `/v1/agents/${agentId}`)).json().data.agent;
    expect(adopted).toMatchObject({ id: agentId, description: 'from the file', managedBy: 'setup' });
    const refused = await call('PATCH', `/v1/agents/${agentId}`, { description: 'api again' });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().code).toBe('managed_by_setup');

    // Once adopted, plain applies of the file go through.
    expect(await main(['apply', file])).toBe(0);
  });

  it('matches by id too, and refuses API-created projects and keys the same way', async () => {
    const agent = (await call('POST', '/v1/workspace/wsp_main/agents', { title: 'By id' })).json().data.agent;
    const project = (await call('POST', '/v1/projects', { name: 'API project' })).json().data.project;
    const key = (await call('POST', '/v1/workspace/wsp_main/api-keys', { name: 'api-key' })).json().data
      .apiKey;
    const file = writeFile(
      'mixed.yaml',
      `${fileDeclaring(`          - { id: ${agent.id}, title: Renamed in file }`)}        projects:
          - { name: API project }
        apiKeys:
          - { name: api-key, user: olivia@acme.test }
`.replace(
        '    workspaces:',
        '    users:\n      - { id: usr_olivia, name: Olivia, email: olivia@acme.test }\n    workspaces:',
      ),
    );
    expect(await main(['apply', file])).toBe(2);
    const message = output.err.join('\n');
    expect(message).toContain(agent.id);
    expect(message).toContain(project.id);
    expect(message).toContain(key.id);
    expect((await call('GET', `/v1/agents/${agent.id}`)).json().data.agent.title).toBe('By id');
  });

  it('refuses (exit 2) a file declaring a key made with atrium keys create, which it would re-key', async () => {
    const args = 'keys create --workspace wsp_main --user usr_max --name cli-made --json';
    expect(await main(args.split(' '))).toBe(0);
    const made = JSON.parse(output.out.at(-1)!);
    const file = keyFileFor(
      'cli-made.yaml',
      'name: cli-made, user: usr_max, key: "atr_ws_mgmt_cli_made_replaced_000000000000"',
    );
    // Before: the key counted as the file's (managedBy setup), so this apply re-keyed it silently
    // and the key the CLI printed stopped working.
    expect(await main(['apply', file])).toBe(2);
    expect(output.err.join('\n')).toContain(`workspace key "cli-made" (${made.id})`);
    const me = await app.inject({ method: 'GET', url: '/v1/me', headers: { 'x-service-api-key': made.key } });
    expect(me.statusCode).toBe(200);
    const keyInfo = (await call('GET', '/v1/workspace/wsp_main/api-keys'))
      .json()
      .data.apiKeys.find((key: { id: string }) => key.id === made.id);
    expect(keyInfo.managedBy).toBe('api');
  });
});

describe(`atrium apply and names the API has freed (${engineName})`, () => {
  it('creates a new agent for a title only an agent deleted over the API had', async () => {
    const gone = (await call('POST', '/v1/workspace/wsp_main/agents', { title: 'Temp' })).json().data.agent;
    expect((await call('DELETE', `/v1/agents/${gone.id}`)).statusCode).toBe(200);
    const file = writeFile(
      'temp.yaml',
      fileDeclaring('          - { title: Temp, description: from the file }'),
    );

    // Before: exit 2 naming the deleted agent as managed through the API (with --adopt, it
    // was "updated" and stayed deleted).
    expect(await main(['apply', file])).toBe(0);
    const listed = (await call('GET', '/v1/workspace/wsp_main/agents?limit=100')).json().data.agents;
    const temp = listed.filter((agent: { title: string }) => agent.title === 'Temp');
    expect(temp).toHaveLength(1);
    expect(temp[0].id).not.toBe(gone.id);
    expect((await call('GET', `/v1/agents/${temp[0].id}`)).json().data.agent).toMatchObject({
      description: 'from the file',
      managedBy: 'setup',
    });
    expect((await call('GET', `/v1/agents/${gone.id}`)).statusCode).toBe(404);
    // The file's agent is the one it matches from now on.
    expect(await main(['apply', file])).toBe(0);
    expect(output.out.at(-1)).toContain('nothing to change');
  });

  it('keeps matching an agent the file itself deleted, before a live one the API made with its title', async () => {
    const file = writeFile(
      'retired.yaml',
      fileDeclaring('          - { title: Retired here, deleted: true }'),
    );
    expect(await main(['apply', file])).toBe(0);
    expect(await main(['apply', file])).toBe(0);
    expect(output.out.at(-1)).toContain('nothing to change');
    // The title is free for the API; the file still names its own (deleted) agent, not this one.
    const live = (await call('POST', '/v1/workspace/wsp_main/agents', { title: 'Retired here' })).json().data
      .agent;
    expect(await main(['apply', file])).toBe(0);
    expect(output.out.at(-1)).toContain('nothing to change');
    expect((await call('GET', `/v1/agents/${live.id}`)).json().data.agent).toMatchObject({
      managedBy: 'api',
    });
    const rows = await database.db
      .selectFrom('agents')
      .select('id')
      .where('title', '=', 'Retired here')
      .execute();
    expect(rows).toHaveLength(2);
  });

  it('creates a new key for a name only a key revoked over the API had', async () => {
    const revoked = (
      await call('POST', '/v1/workspace/wsp_main/api-keys', { name: 'deploy', userId: 'usr_max' })
    ).json().data.apiKey;
    expect((await call('DELETE', `/v1/api-keys/${revoked.id}`)).statusCode).toBe(200);
    const file = keyFileFor('deploy.yaml', 'name: deploy, user: usr_max');

    // Before: exit 2; with --adopt, no key printed and the revoked key's id reported.
    expect(await main(['apply', '--json', file])).toBe(0);
    const report = JSON.parse(output.out.at(-1)!);
    expect(report.ids.apiKeys.deploy).not.toBe(revoked.id);
    const me = await app.inject({
      method: 'GET',
      url: '/v1/me',
      headers: { 'x-service-api-key': report.keys.deploy },
    });
    expect(me.json().data.key).toMatchObject({ id: report.ids.apiKeys.deploy, name: 'deploy' });
    const keyInfo = (await call('GET', '/v1/workspace/wsp_main/api-keys'))
      .json()
      .data.apiKeys.find((key: { id: string }) => key.id === revoked.id);
    expect(keyInfo).toMatchObject({ revokedAt: expect.any(String), managedBy: 'api' });
  });

  it('creates a new key for a name only an expired key made over the API had', async () => {
    const expired = (
      await call('POST', '/v1/workspace/wsp_main/api-keys', {
        name: 'nightly',
        userId: 'usr_max',
        expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
      })
    ).json().data.apiKey;
    // The CLI reads the real clock: the key's expiry is moved into the past instead.
    await database.db
      .updateTable('api_keys')
      .set({ expires_at: '2020-01-01T00:00:00.000Z' })
      .where('id', '=', expired.id)
      .execute();
    const file = keyFileFor('nightly.yaml', 'name: nightly, user: usr_max');

    // Before: exit 2 naming the expired key as managed through the API.
    expect(await main(['apply', '--json', file])).toBe(0);
    const report = JSON.parse(output.out.at(-1)!);
    expect(report.ids.apiKeys.nightly).not.toBe(expired.id);
    expect(report.keys.nightly).toMatch(/^atr_ws_/);
  });
});

describe(`atrium apply and API-managed objects in a new workspace (${engineName})`, () => {
  it('refuses an API-created agent named by id under an organization and workspace that do not exist yet', async () => {
    const agent = (await call('POST', '/v1/workspace/wsp_main/agents', { title: 'Moved by a file' })).json()
      .data.agent;
    const file = writeFile(
      'elsewhere.yaml',
      `
organizations:
  - id: org_new
    name: New
    workspaces:
      - id: wsp_new
        name: New
        agents:
          - { id: ${agent.id}, title: Moved by a file }
`,
    );
    expect(await main(['apply', file])).toBe(2);
    expect(output.err.join('\n')).toContain(`agent "Moved by a file" (${agent.id}) for new workspace New`);
    // Still where the API made it, still the API's.
    expect((await call('GET', `/v1/agents/${agent.id}`)).json().data.agent).toMatchObject({
      title: 'Moved by a file',
      managedBy: 'api',
    });
  });
});

describe(`atrium apply and agent titles (${engineName})`, () => {
  it('refuses a file that would give a second live agent a title the workspace already has', async () => {
    expect((await call('POST', '/v1/workspace/wsp_main/agents', { title: 'Taken title' })).statusCode).toBe(
      201,
    );
    const file = writeFile(
      'title.yaml',
      fileDeclaring('          - { id: agt_same_title, title: Taken title }'),
    );
    expect(await main(['apply', file])).toBe(2);
    expect(output.err.join('\n')).toContain('"Taken title" in wsp_main');
    // Nothing of the file was applied.
    expect((await call('GET', '/v1/agents/agt_same_title')).statusCode).toBe(404);
  });

  it('refuses (exit 2) a file naming by id an object of another workspace, --adopt or not', async () => {
    // agt_globex is another organization's agent: a copied or mistyped id must not move it here.
    const file = writeFile(
      'moved.yaml',
      fileDeclaring('          - { id: agt_globex, title: Globex agent }'),
    );
    for (const args of [
      ['apply', file],
      ['apply', file, '--adopt'],
    ]) {
      output.err.length = 0;
      expect(await main(args)).toBe(2);
      expect(output.err.join('\n')).toContain('agt_globex');
    }
    const row = await database.db
      .selectFrom('agents')
      .select('workspace_id')
      .where('id', '=', 'agt_globex')
      .executeTakeFirstOrThrow();
    expect(row.workspace_id).toBe('wsp_globex');
  });
});

describe(`atrium apply and users (${engineName})`, () => {
  const userRow = (email: string) =>
    database.db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirstOrThrow();
  /** A setup file declaring one user (a flow-style YAML map) in Acme. */
  const acmeUserFile = (name: string, user: string) =>
    writeFile(name, `\norganizations:\n  - id: org_acme\n    name: Acme\n    users: [${user}]\n`);

  it('refuses (exit 2) a user named by an email another organization has, instead of moving it', async () => {
    // Gina is Globex's: found by her email, she was moved to Acme, her Globex key left behind.
    const file = acmeUserFile('moved-user.yaml', '{ name: Gina, email: gina@globex.test }');
    expect(await main(['apply', file])).toBe(2);
    expect(output.err).toEqual([
      `atrium: ${file}: nothing was applied: The setup file would move user gina@globex.test (usr_gina) from organization org_globex to org_acme.`,
      'atrium: An email names one user wherever it lives: check the email, or set the user up in its own organization.',
    ]);
    expect((await userRow('gina@globex.test')).organization_id).toBe('org_globex');
  });

  it('refuses (exit 2) a user given a new id and an email another user has, not with a database error', async () => {
    const file = acmeUserFile(
      'taken-email.yaml',
      '{ id: usr_olivia_again, name: Olivia, email: olivia@acme.test }',
    );
    // Before: the insert's unique constraint, exit 1.
    expect(await main(['apply', file])).toBe(2);
    expect(output.err).toEqual([
      `atrium: ${file}: nothing was applied: The setup file gives user usr_olivia_again the email olivia@acme.test, which user usr_olivia has.`,
      'atrium: An email names one user: name that user by id usr_olivia, or give this one another email.',
    ]);
    expect((await userRow('olivia@acme.test')).id).toBe('usr_olivia');
  });

  /** A setup file declaring one key of Olivia's in an Acme workspace (by its id and name as set up). */
  const WORKSPACE_NAMES: Record<string, string> = { wsp_main: 'Main', wsp_other: 'Other' };
  const keyFile = (name: string, workspace: string, key: string) =>
    writeFile(
      name,
      `
organizations:
  - id: org_acme
    name: Acme
    users: [{ id: usr_olivia, name: Olivia, email: olivia@acme.test }]
    workspaces:
      - id: ${workspace}
        name: ${WORKSPACE_NAMES[workspace]}
        apiKeys:
          - { ${key} }
`,
    );
  /** The first stored key of that name in the workspace, as apply finds a key named without id. */
  const firstKeyNamed = async (workspace: string, name: string) =>
    (
      await database.db
        .selectFrom('api_keys')
        .select('id')
        .where('workspace_id', '=', workspace)
        .where('name', '=', name)
        .executeTakeFirstOrThrow()
    ).id;

  it('refuses (exit 2) a key renamed in the file with its plaintext, naming the key that has it, not the plaintext', async () => {
    const holder = await firstKeyNamed('wsp_other', 'other-owner');
    const plaintext = `user: usr_olivia, key: "${MKEYS.otherWorkspace}"`;
    // Named without its id, the renamed key is a new key with another key's plaintext: before,
    // the insert's unique constraint on the key's hash, exit 1.
    const file = keyFile('renamed-key.yaml', 'wsp_other', `name: other-owner-renamed, ${plaintext}`);
    expect(await main(['apply', file])).toBe(2);
    expect(output.err).toEqual([
      `atrium: ${file}: nothing was applied: The setup file gives key other-owner-renamed the plaintext key that key other-owner (${holder}) has.`,
      `atrium: A plaintext key names one key: name key ${holder} by its id to rename it, or give this one another key.`,
    ]);
    expect(output.err.join('\n')).not.toContain(MKEYS.otherWorkspace);
    // Named by its id, the same key takes the new name.
    const byId = keyFile(
      'renamed-key-by-id.yaml',
      'wsp_other',
      `id: ${holder}, name: other-owner-renamed, ${plaintext}`,
    );
    expect(await main(['apply', byId])).toBe(0);
    expect(await firstKeyNamed('wsp_other', 'other-owner-renamed')).toBe(holder);
  });

  it('adopts a pasted live key whose name a key revoked over the API shares, leaving the revoked one', async () => {
    const made = (await call('POST', '/v1/workspace/wsp_main/api-keys', { name: 'ci' })).json().data;
    expect((await call('DELETE', `/v1/api-keys/${made.apiKey.id}`)).statusCode).toBe(200);
    const live = (await call('POST', '/v1/workspace/wsp_main/api-keys', { name: 'ci' })).json().data;
    const file = keyFile('pasted-key.yaml', 'wsp_main', `name: ci, user: usr_olivia, key: "${live.key}"`);
    // The revoked key is the first of that name; the API freed its name, so apply matches the
    // live one (before: re-keying the revoked one, a unique-constraint error, then exit 2).
    expect(await firstKeyNamed('wsp_main', 'ci')).toBe(made.apiKey.id);
    expect(await main(['apply', '--adopt', '--json', file])).toBe(0);
    expect(JSON.parse(output.out.at(-1)!).ids.apiKeys.ci).toBe(live.apiKey.id);
    const listed = (await call('GET', '/v1/workspace/wsp_main/api-keys')).json().data.apiKeys;
    expect(listed.find((key: { id: string }) => key.id === live.apiKey.id)).toMatchObject({
      revokedAt: null,
      managedBy: 'setup',
    });
    expect(listed.find((key: { id: string }) => key.id === made.apiKey.id)).toMatchObject({
      revokedAt: expect.any(String),
      managedBy: 'api',
    });
  });

  it('refuses (exit 2) a pasted live key whose name a revoked key of the file shares, where that would re-key the revoked one', async () => {
    expect(
      await main(['apply', keyFile('ci-file.yaml', 'wsp_main', 'name: ci-file, user: usr_olivia')]),
    ).toBe(0);
    const revoked = await firstKeyNamed('wsp_main', 'ci-file');
    expect((await call('DELETE', `/v1/api-keys/${revoked}`)).statusCode).toBe(200);
    const live = (await call('POST', '/v1/workspace/wsp_main/api-keys', { name: 'ci-file' })).json().data;
    const file = keyFile(
      'pasted-key.yaml',
      'wsp_main',
      `name: ci-file, user: usr_olivia, key: "${live.key}"`,
    );
    // Found by its name, the key apply writes is the file's own, revoked: re-keying it failed on
    // the hash's unique constraint.
    expect(await main(['apply', '--adopt', file])).toBe(2);
    expect(output.err[1]).toBe(
      `atrium: A plaintext key names one key: name key ${live.apiKey.id} by its id to rename it, or give this one another key.`,
    );
    expect(output.err.join('\n')).not.toContain(live.key);
  });
});

describe(`atrium export (${engineName})`, () => {
  it('prints the API-managed agents and projects as a setup file that --adopt applies', async () => {
    const agent = (
      await call('POST', '/v1/workspace/wsp_main/agents', {
        title: 'Exported',
        instructions: 'Be exact.',
        model: 'local/small',
        tools: [
          {
            type: 'mcp',
            name: 'crm',
            url: 'https://mcp.example.test/',
            headers: { authorization: 'Bearer x' },
          },
        ],
      })
    ).json().data.agent;
    const project = (
      await call('POST', '/v1/projects', { name: 'Exported project', color: '#112233' })
    ).json().data.project;

    expect(await main(['export', '--workspace', 'wsp_main'])).toBe(0);
    const text = output.out.join('\n');
    expect(text).toMatch(/^# atrium export --workspace wsp_main/);
    const exported = parseYaml(text);
    const workspace = exported.organizations[0].workspaces[0];
    expect(workspace).toMatchObject({ id: 'wsp_main', name: 'Main' });
    expect(workspace.agents).toContainEqual({
      id: agent.id,
      title: 'Exported',
      visibility: 'workspace',
      model: 'local/small',
      instructions: 'Be exact.',
      tools: [
        {
          type: 'mcp',
          name: 'crm',
          url: 'https://mcp.example.test/',
          headers: { authorization: 'Bearer x' },
        },
      ],
    });
    expect(workspace.agents.map((a: { id: string }) => a.id)).not.toContain('agt_file');
    expect(workspace.projects).toContainEqual({ id: project.id, name: 'Exported project', color: '#112233' });
    expect(workspace.projects.map((p: { id: string }) => p.id)).not.toContain('prj_file');

    // As an operator would: the export goes into the file that defines the models it names.
    const definitions = MANAGEMENT_SETUP.slice(0, MANAGEMENT_SETUP.indexOf('organizations:'));
    const file = writeFile('exported.yaml', `${definitions}${text}`);
    expect(await main(['apply', file])).toBe(2);
    expect(await main(['apply', '--adopt', file])).toBe(0);
    expect((await call('GET', `/v1/agents/${agent.id}`)).json().data.agent.managedBy).toBe('setup');
    expect((await call('GET', `/v1/projects/${project.id}`)).json().data.project.managedBy).toBe('setup');
  });

  it('answers a usage error without --workspace, and exit 2 with one line for an unknown workspace', async () => {
    expect(await main(['export'])).toBe(2);
    output.err = [];
    // As `keys create` answers an unknown workspace (it was 1 here, 2 there).
    expect(await main(['export', '--workspace', 'wsp_nope'])).toBe(2);
    expect(output.err).toEqual(['atrium: No workspace wsp_nope']);
  });

  it('warns on stderr of a stored title apply would refuse, and exports it as stored', async () => {
    // Titles stored before today's rule (a tab, 150 characters): the file takes neither.
    const agent = (await call('POST', '/v1/workspace/wsp_main/agents', { title: 'Legacy title' })).json().data
      .agent;
    await database.db
      .updateTable('agents')
      .set({ title: 'Legacy\ttitle' })
      .where('id', '=', agent.id)
      .execute();
    expect(await main(['export', '--workspace', 'wsp_main'])).toBe(0);
    expect(output.err).toEqual([
      `atrium: warning: agent ${agent.id}: its title "Legacy\\ttitle" breaks the setup file's rule for names (at most 100 characters, one line, a character that shows): edit it in the file before \`atrium apply\``,
    ]);
    expect(output.out.join('\n')).toContain('title: Legacy\ttitle');
  });

  it('warns on stderr of a stored project name apply would refuse, and exports it as stored', async () => {
    // A name stored before project names had to be one line: the file takes it no more.
    const project = (await call('POST', '/v1/projects', { name: 'Legacy project' })).json().data.project;
    await database.db
      .updateTable('projects')
      .set({ name: 'Legacy\tproject' })
      .where('id', '=', project.id)
      .execute();
    expect(await main(['export', '--workspace', 'wsp_main'])).toBe(0);
    expect(output.err).toContain(
      `atrium: warning: project ${project.id}: its name "Legacy\\tproject" breaks the setup file's rule for project names (at most 200 characters, one line, a character that shows, no white space at either end): edit it in the file before \`atrium apply\``,
    );
    expect(output.out.join('\n')).toContain('name: Legacy\tproject');
  });
});
