import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../../src/app.js';
import { main } from '../../src/cli/main.js';
import { loadConfig } from '../../src/config.js';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.js';
import { engineName } from '../helpers/app.js';
import { createOwnDatabase } from '../helpers/own-database.js';
import { MANAGEMENT_SETUP, MKEYS } from './fixtures.js';

/**
 * `atrium export` read back by `atrium apply` on a fresh database: every text exactly as the API
 * stored it. Two databases: the source (written over the API) and a fresh one the export goes to.
 */
let dir: string;
const source = { dataDir: '', own: undefined as Awaited<ReturnType<typeof createOwnDatabase>> };
const fresh = { dataDir: '', own: undefined as Awaited<ReturnType<typeof createOwnDatabase>> };
let database: DatabaseHandle;
let app: Awaited<ReturnType<typeof buildApp>>;
const output = { out: [] as string[], err: [] as string[] };

/** Points the CLI (which reads them as an operator's shell gives them) at one of the two databases. */
function useDatabase(target: typeof source) {
  process.env.ATRIUM_DATA_DIR = target.dataDir;
  if (target.own) process.env.DATABASE_URL = target.own.url;
}

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

/** The export of wsp_main from the source database, as printed on stdout. */
async function exportMain(): Promise<string> {
  useDatabase(source);
  output.out = [];
  expect(await main(['export', '--workspace', 'wsp_main'])).toBe(0);
  return `${output.out.join('\n')}\n`;
}

/** The export applied to the fresh database, after the model definitions it names (as an operator would). */
async function applyToFresh(name: string, exported: string): Promise<number> {
  const definitions = MANAGEMENT_SETUP.slice(0, MANAGEMENT_SETUP.indexOf('organizations:'));
  useDatabase(fresh);
  try {
    return await main(['apply', writeFile(name, `${definitions}${exported}`)]);
  } finally {
    useDatabase(source);
  }
}

/** Reads the fresh database's rows. */
async function inFresh<T>(fn: (db: DatabaseHandle['db']) => Promise<T>): Promise<T> {
  useDatabase(fresh);
  const handle = await openDatabase(loadConfig().database);
  try {
    return await fn(handle.db);
  } finally {
    await handle.close();
    useDatabase(source);
  }
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'atrium-export-'));
  source.dataDir = path.join(dir, 'source');
  fresh.dataDir = path.join(dir, 'fresh');
  process.env.LOG_LEVEL = 'silent';
  source.own = await createOwnDatabase('atrium_export_source');
  fresh.own = await createOwnDatabase('atrium_export_fresh');
  useDatabase(source);
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
  await source.own?.drop();
  await fresh.own?.drop();
});
beforeEach(() => {
  output.out = [];
  output.err = [];
  vi.spyOn(console, 'log').mockImplementation((...args) => void output.out.push(args.join(' ')));
  vi.spyOn(console, 'error').mockImplementation((...args) => void output.err.push(args.join(' ')));
});

/**
 * Texts YAML would read otherwise when written carelessly: spaces and newlines at either end,
 * `\r`, tabs, words and numbers of other types, comment and indicator characters, separators of
 * lines in Unicode. The last ones broke the yaml library's own choice of style (2.9.1).
 */
const TEXTS = [
  '  leading spaces',
  'trailing spaces  ',
  'one trailing newline\n',
  'no trailing newline\nsecond line',
  'two trailing newlines\n\n',
  '\nleading newline',
  'windows\r\nline ends\r\n',
  'a lone \r in the middle',
  '\ttabs\tinside\t',
  'tab\n\tindented line\n',
  'yes',
  'no',
  'null',
  '~',
  '12',
  '0x1F',
  '1e3',
  'true',
  '# not a comment',
  'key: value',
  '- item\n- another: one\n',
  'line\u2028separator\u2029paragraph\u0085next line',
  '"double" and \'single\'',
  '| looks like a block',
  '---\ndocument marker\n...\n',
  'a line with trailing spaces   \nnext',
  ' \n',
  '  \n\n',
  '\n \n\u001b escape after a blank line with a space, long enough to be folded by the library',
  'last of the file: its trailing newlines are the document end\n\n\n',
];

describe(`atrium export read back by atrium apply (${engineName})`, () => {
  it('keeps every text of agents and projects byte for byte on a fresh database', async () => {
    const pad = (i: number) => String(i).padStart(2, '0');
    const agents: string[] = [];
    const projects: string[] = [];
    for (const [i, text] of TEXTS.entries()) {
      const agent = await call('POST', '/v1/workspace/wsp_main/agents', {
        title: `Text ${pad(i)}`,
        description: text,
        category: text,
        instructions: text,
      });
      expect(agent.statusCode, JSON.stringify(text)).toBe(201);
      agents.push(agent.json().data.agent.id as string);
      const project = await call('POST', '/v1/projects', {
        name: `Text ${pad(i)}`,
        description: text,
        instructions: text,
      });
      expect(project.statusCode, JSON.stringify(text)).toBe(201);
      projects.push(project.json().data.project.id as string);
    }
    // Titles that are words or numbers of other types in YAML.
    for (const title of ['yes', 'null', '12', '0x1F', '~', 'Off']) {
      const agent = await call('POST', '/v1/workspace/wsp_main/agents', { title });
      expect(agent.statusCode).toBe(201);
      agents.push(agent.json().data.agent.id as string);
    }

    const exported = await exportMain();
    expect(await applyToFresh('texts.yaml', exported), output.err.join('\n')).toBe(0);

    const agentColumns = ['id', 'title', 'description', 'category', 'instructions'] as const;
    const projectColumns = ['id', 'name', 'description', 'instructions'] as const;
    const stored = {
      agents: await database.db
        .selectFrom('agents')
        .select(agentColumns)
        .where('id', 'in', agents)
        .orderBy('id')
        .execute(),
      projects: await database.db
        .selectFrom('projects')
        .select(projectColumns)
        .where('id', 'in', projects)
        .orderBy('id')
        .execute(),
    };
    const applied = await inFresh(async (db) => ({
      agents: await db
        .selectFrom('agents')
        .select(agentColumns)
        .where('id', 'in', agents)
        .orderBy('id')
        .execute(),
      projects: await db
        .selectFrom('projects')
        .select(projectColumns)
        .where('id', 'in', projects)
        .orderBy('id')
        .execute(),
    }));
    expect(stored.agents).toHaveLength(TEXTS.length + 6);
    expect(applied).toEqual(stored);
  });

  it('names no deleted sub-agent in an orchestration, so that the export applies', async () => {
    const create = async (body: object) => {
      const response = await call('POST', '/v1/workspace/wsp_main/agents', body);
      expect(response.statusCode).toBe(201);
      return response.json().data.agent.id as string;
    };
    const kept = await create({ title: 'Kept helper' });
    const gone = await create({ title: 'Gone helper' });
    const lead = await create({ title: 'Lead of both', orchestration: { agents: [kept, gone] } });
    expect((await call('DELETE', `/v1/agents/${gone}`)).statusCode).toBe(200);

    const exported = await exportMain();
    expect(exported).not.toContain(gone);
    expect(await applyToFresh('orchestration.yaml', exported), output.err.join('\n')).toBe(0);
    const orchestration = await inFresh(async (db) =>
      db.selectFrom('agents').select('orchestration').where('id', '=', lead).executeTakeFirstOrThrow(),
    );
    expect(JSON.parse(orchestration.orchestration!)).toEqual({ agents: [kept] });
  });
});
