import { randomBytes } from 'node:crypto';
import fs, { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { failureMessage, listenFailureHint, main } from '../../src/cli/main.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/database.js';
import { engineName, testDatabaseUrl } from '../helpers/app.js';
import { createOwnDatabase } from '../helpers/own-database.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

let dir: string;
let ownDatabase: Awaited<ReturnType<typeof createOwnDatabase>>;
const output = { out: [] as string[], err: [] as string[] };

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'atrium-cli-'));
  process.env.ATRIUM_DATA_DIR = dir;
  process.env.LOG_LEVEL = 'silent';
  // The CLI reads DATABASE_URL like any operator's shell: give it a database of its own.
  ownDatabase = await createOwnDatabase('atrium_cli');
  if (ownDatabase) process.env.DATABASE_URL = ownDatabase.url;
});
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await ownDatabase?.drop();
});
beforeEach(() => {
  output.out = [];
  output.err = [];
  vi.spyOn(console, 'log').mockImplementation((...args) => void output.out.push(args.join(' ')));
  vi.spyOn(console, 'error').mockImplementation((...args) => void output.err.push(args.join(' ')));
});

// First in the file: the database is still empty here.
describe(`atrium migrate (${engineName})`, () => {
  it('reports the migrations it applied on an empty database, then that it is up to date', async () => {
    expect(await main(['migrate'])).toBe(0);
    // It said "Database is up to date" here: the database had been migrated before it looked.
    expect(output.out.join('\n')).toMatch(/^Applied migrations: 001-/);
    output.out = [];
    expect(await main(['migrate'])).toBe(0);
    expect(output.out).toEqual(['Database is up to date']);
  });
});

/** Every setting in milliseconds, with its smallest value. */
const TIMER_SETTINGS = [
  ['ATRIUM_UPSTREAM_TIMEOUT_MS', 1],
  ['ATRIUM_IDLE_TIMEOUT_MS', 1],
  ['ATRIUM_HEADERS_TIMEOUT_MS', 1],
  ['ATRIUM_BODY_TIMEOUT_MS', 1],
  ['ATRIUM_KEEP_ALIVE_TIMEOUT_MS', 1],
  ['ATRIUM_STREAM_HEARTBEAT_MS', 0],
  ['ATRIUM_SWEEP_INTERVAL_MS', 0],
  ['ATRIUM_INDEX_TIMEOUT_MS', 1],
  ['ATRIUM_INDEX_POLL_MS', 1],
  ['ATRIUM_INDEX_RETRY_MS', 0],
  ['ATRIUM_INDEX_LEASE_MS', 100],
  ['ATRIUM_DB_CONNECT_TIMEOUT_MS', 1],
  ['ATRIUM_S3_IDLE_TIMEOUT_MS', 1],
] as const;

function writeSetup(name: string, text: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

/** `atrium apply FILE` on a file it must refuse whole: exit 2; what it printed. */
async function refusedApply(file: string): Promise<string> {
  expect(await main(['apply', file])).toBe(2);
  return output.err.join('\n');
}

async function countRows() {
  const database = await openDatabase(loadConfig().database);
  try {
    const counts: Record<string, unknown> = {};
    for (const table of [
      'organizations',
      'users',
      'workspaces',
      'api_keys',
      'agents',
      'projects',
      'workspace_members',
    ] as const) {
      counts[table] = await database.db.selectFrom(table).selectAll().execute();
    }
    return counts;
  } finally {
    await database.close();
  }
}

describe(`atrium command (${engineName})`, () => {
  it('refuses an invalid setup file whole with exit code 2, naming the file and every problem path', async () => {
    const file = writeSetup(
      'bad.yaml',
      `
organizations:
  - id: org_x
    name: X
    users: [{ id: usr_a, name: A, email: not-an-email }]
    workspaces:
      - id: wsp_x
        name: X
        models: [nope]
        members: [{ user: usr_ghost, role: owner }, { user: usr_a, role: king }]
        agents:
          - { title: Lead, orchestration: { agents: [agt_missing] } }
          - { title: Tooled, tools: [{ type: sse, url: 5 }] }
        projects:
          - { name: P, color: blue }
`,
    );
    expect(await main(['migrate'])).toBe(0);
    const before = await countRows();
    const text = await refusedApply(file);
    expect(text).toContain(file);
    expect(text).toContain('organizations[0].users[0].email');
    // One line naming the roles, not "must be equal to constant" for each and "must match a schema in anyOf".
    expect(text.split('\n').filter((line) => line.includes('members[1].role'))).toEqual([
      `atrium: ${file}: organizations[0].workspaces[0].members[1].role: must be "owner", "admin" or "member"`,
    ]);
    expect(text).toContain('organizations[0].workspaces[0].projects[0].color');
    // Each problem of the tool once, in the API's words: not "must have required property 'name'",
    // "must be equal to constant", nor a URL check of a url that is not a string.
    expect(text.split('\n').filter((line) => line.includes('agents[1].tools[0]'))).toEqual(
      ['tools[0].name: is required', 'tools[0].type: must be "mcp"', 'tools[0].url: must be string'].map(
        (problem) => `atrium: ${file}: organizations[0].workspaces[0].agents[1].${problem}`,
      ),
    );
    // Reference problems are listed in the same run as the shape problems, not after a fix.
    expect(text).toContain('organizations[0].workspaces[0].models[0]: unknown model "nope"');
    expect(text).toContain('organizations[0].workspaces[0].members[0].user: unknown user "usr_ghost"');
    expect(await countRows()).toEqual(before);
  });

  it('refuses a key expiring on a leap second, which the date-time format passes and no date can hold', async () => {
    const file = writeSetup(
      'leap.yaml',
      `
organizations:
  - id: org_l
    name: L
    users: [{ id: usr_l, name: L, email: l@l.test }]
    apiKeys:
      - { name: org-key, user: usr_l, expiresAt: "2027-06-30T23:59:60Z" }
    workspaces:
      - id: wsp_l
        name: L
        members: [{ user: usr_l, role: owner }]
        apiKeys:
          - { name: k, user: usr_l, expiresAt: "2027-06-30T23:59:60Z" }
`,
    );
    expect(await main(['migrate'])).toBe(0);
    const before = await countRows();
    const text = await refusedApply(file);
    expect(text).toContain('organizations[0].apiKeys[0].expiresAt');
    expect(text).toContain('organizations[0].workspaces[0].apiKeys[0].expiresAt');
    expect(await countRows()).toEqual(before);
  });

  it('says once what is wrong with an optional (clearable) field, without "must be null" or a leap second it does not have', async () => {
    const file = writeSetup(
      'clearable.yaml',
      `
organizations:
  - id: org_c
    name: C
    users: [{ id: usr_c, name: C, email: c@c.test }]
    workspaces:
      - id: wsp_c
        name: C
        members: [{ user: usr_c, role: owner }]
        limits: { monthlyTokens: -1 }
        apiKeys:
          - { name: k, user: usr_c, expiresAt: "2027-13-01T00:00:00Z" }
        projects:
          - { name: P, color: blue }
`,
    );
    output.err.length = 0;
    const lines = (await refusedApply(file)).split('\n');
    const about = (path: string) => lines.filter((line) => line.includes(`: ${path}: `));
    expect(about('organizations[0].workspaces[0].apiKeys[0].expiresAt')).toEqual([
      `atrium: ${file}: organizations[0].workspaces[0].apiKeys[0].expiresAt: must match format "date-time"`,
    ]);
    expect(about('organizations[0].workspaces[0].projects[0].color')).toEqual([
      `atrium: ${file}: organizations[0].workspaces[0].projects[0].color: must be a color written #RRGGBB`,
    ]);
    expect(about('organizations[0].workspaces[0].limits.monthlyTokens')).toEqual([
      `atrium: ${file}: organizations[0].workspaces[0].limits.monthlyTokens: must be >= 0`,
    ]);
    expect(lines.join('\n')).not.toMatch(/must be null|anyOf|leap second/);
  });

  it('names each mistake of a setup file on one line: an undefined default model, an unknown key user, a bad model kind', async () => {
    // Before, each of these was two lines: "must be one of the workspace models", "is not a member
    // of this workspace", and "is a chat model" for the embedding model whose kind was refused.
    const file = writeSetup(
      'one-line-each.yaml',
      `
models:
  - { id: vectors, provider: openai, model: text-embedding-3-small, kind: vector }
organizations:
  - id: org_o
    name: O
    users: [{ id: usr_o, name: O, email: o@o.test }]
    workspaces:
      - id: wsp_o
        name: O
        models: [atrium/echo]
        defaultModel: ghost
        embeddingModel: vectors
        members: [{ user: usr_o, role: owner }]
        apiKeys:
          - { name: k, user: usr_ghost }
`,
    );
    output.err.length = 0;
    const text = await refusedApply(file);
    expect(text.split('\n')).toEqual([
      `atrium: ${file} is invalid; nothing was applied:`,
      ...[
        'models[0].kind: must be "chat" or "embedding"',
        'organizations[0].workspaces[0].defaultModel: unknown model "ghost" (define it under models)',
        'organizations[0].workspaces[0].apiKeys[0].user: unknown user "usr_ghost" (not among organizations[0].users)',
      ].map((problem) => `atrium: ${file}: ${problem}`),
    ]);
  });

  it('refuses limits and prices no counter or column can hold (1e22 tokens, .inf) with exit 2, naming each', async () => {
    const file = writeSetup(
      'huge-limits.yaml',
      `
providers:
  - { id: prv_h, type: openai-compatible, baseURL: "http://127.0.0.1:9/v1" }
models:
  - { id: model-h, provider: prv_h, model: h-1, pricing: { inputPerMTok: .inf, outputPerMTok: 1 } }
organizations:
  - id: org_h
    name: H
    users: [{ id: usr_h, name: H, email: h@h.test }]
    workspaces:
      - id: wsp_h
        name: H
        members: [{ user: usr_h, role: owner }]
        limits:
          monthlyTokens: 10000000000000000000000
          monthlyCostUsd: .inf
          chatSpendCapUsd: 1e400
          rateLimitPerMinute: 2147483648
`,
    );
    expect(await main(['migrate'])).toBe(0);
    const before = await countRows();
    const text = await refusedApply(file);
    for (const limit of ['monthlyTokens', 'monthlyCostUsd', 'chatSpendCapUsd', 'rateLimitPerMinute'])
      expect(text).toContain(`organizations[0].workspaces[0].limits.${limit}`);
    expect(text).toContain('models[0].pricing.inputPerMTok');
    expect(await countRows()).toEqual(before);
  });

  it('refuses ids with "/" (storage paths of two workspaces would overlap) and ids "." and ".."', async () => {
    const file = writeSetup(
      'slash.yaml',
      `
organizations:
  - id: org_s
    name: S
    workspaces:
      - { id: acme, name: A, projects: [{ id: eu, name: EU }] }
      - { id: acme/eu, name: B, projects: [{ id: "..", name: Up }] }
`,
    );
    const text = await refusedApply(file);
    expect(text).toContain(
      'organizations[0].workspaces[1].id: must be letters, digits and _ . : - only (no "/"), and not "." or ".."',
    );
    expect(text).toContain('organizations[0].workspaces[1].projects[0].id: must be letters');
    expect(text).not.toContain('organizations[0].workspaces[0]');
  });

  it('answers a name that is not there and a bad setting with exit 2 and one line, no usage text', async () => {
    expect(await main(['migrate'])).toBe(0);
    output.err = [];
    expect(await main(['keys', 'create', '--workspace', 'wsp_nope', '--user', 'usr_x'])).toBe(2);
    expect(output.err).toEqual(['atrium: No workspace wsp_nope']);
    // Node fires a timer set past 2^31 − 1 ms after 1 ms: a 25-day sweep interval swept continuously.
    const pastTimers = TIMER_SETTINGS.map(
      ([name, min]) =>
        [
          { [name]: '2147483648' },
          `${name} must be an integer from ${min} to 2147483647, got "2147483648"`,
        ] as const,
    );
    for (const [settings, message] of [
      [
        { LOG_LEVEL: 'loud' },
        'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"',
      ],
      [{ PORT: '70000' }, 'PORT must be an integer from 0 to 65535, got "70000"'],
      [
        { ATRIUM_MCP_ALLOW_PRIVATE_NETWORK: 'yes' },
        'ATRIUM_MCP_ALLOW_PRIVATE_NETWORK must be "true" or "false", got "yes"',
      ],
      ...pastTimers,
      // Read as false before, as was "TRUE" (now true: flags ignore case).
      [
        { ATRIUM_STORAGE: 's3', S3_BUCKET: 'b', S3_FORCE_PATH_STYLE: 'yes' },
        'S3_FORCE_PATH_STYLE must be "true" or "false", got "yes"',
      ],
      // Each started, then failed every storage request ("Invalid URL", or another bucket's
      // "NoSuchBucket") or used the SDK's default credentials in place of the key given alone.
      ...['127.0.0.1:9000', 'minio:9000', 'ftp://minio.example.com', 'http://user:secret@minio:9000'].map(
        (endpoint) =>
          [
            { ATRIUM_STORAGE: 's3', S3_BUCKET: 'b', S3_ENDPOINT: endpoint },
            'S3_ENDPOINT must be an http:// or https:// URL (such as http://127.0.0.1:9000), without credentials, query or fragment',
          ] as const,
      ),
      ...['s3://atrium', 'atrium/files', 'my bucket'].map(
        (bucket) =>
          [
            { ATRIUM_STORAGE: 's3', S3_BUCKET: bucket },
            `S3_BUCKET must be a bucket name (letters, digits, ".", "-" and "_", such as atrium), got "${bucket}"`,
          ] as const,
      ),
      // Each started, then failed every storage request: "Region not accepted … not a valid
      // hostname component" (a name with a space or "_", a URL given for the region).
      ...['us east 1', 'eu_west_1', 'https://s3.eu-west-1.amazonaws.com', '-eu-west-1'].map(
        (region) =>
          [
            { ATRIUM_STORAGE: 's3', S3_BUCKET: 'b', S3_REGION: region },
            `S3_REGION must be a region name (letters, digits and "-", such as us-east-1, or auto for R2), got "${region}"`,
          ] as const,
      ),
      ...(['S3_ACCESS_KEY_ID', 'S3_SECRET_ACCESS_KEY'] as const).map(
        (name) =>
          [
            { ATRIUM_STORAGE: 's3', S3_BUCKET: 'b', [name]: 'x' },
            "S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY must be set together (or neither, for the AWS SDK's default credentials)",
          ] as const,
      ),
      // Alone, it leaves the default idle timeout no room: the message names it, not the default.
      [
        { ATRIUM_UPSTREAM_TIMEOUT_MS: '2147483647' },
        'ATRIUM_UPSTREAM_TIMEOUT_MS must be below 2147483647 (the idle timeout, by default 60 s longer, must be longer), got "2147483647"',
      ],
      // Each started and never matched a browser's Origin (or, `*` among others, allowed any).
      ...['app.example.com', 'https://app.example.com/app', 'https://*.example.com', 'null'].map(
        (origin) =>
          [
            { ATRIUM_CORS_ORIGINS: `http://ok.example.com,${origin}` },
            `ATRIUM_CORS_ORIGINS must be * or comma-separated origins (scheme://host[:port], such as https://app.example.com: no path, query or credentials), got "${origin}"`,
          ] as const,
      ),
      [
        { ATRIUM_CORS_ORIGINS: '*, https://app.example.com' },
        'ATRIUM_CORS_ORIGINS must be * alone (any origin) or a list of origins, not both',
      ],
      // Started, and no request could carry it; `authorization` made every Bearer key invalid.
      ...['x key', 'x-api-key:', 'clé'].map(
        (name) =>
          [
            { ATRIUM_API_KEY_HEADER: name },
            `ATRIUM_API_KEY_HEADER must be an HTTP header name (letters, digits and !#$%&'*+-.^_\`|~, such as x-service-api-key), got "${name}"`,
          ] as const,
      ),
      [
        { ATRIUM_API_KEY_HEADER: 'Authorization' },
        'ATRIUM_API_KEY_HEADER cannot be Authorization, which is always read for "Bearer KEY": unset it or name another header',
      ],
      // Signed URLs were made relative to it; a password in it is not repeated.
      ...['atrium.example.com', 'ftp://atrium.example.com', 'https://user:secret@atrium.example.com'].map(
        (url) =>
          [
            { ATRIUM_PUBLIC_URL: url },
            'ATRIUM_PUBLIC_URL must be an http:// or https:// URL (such as https://atrium.example.com), without credentials, query or fragment',
          ] as const,
      ),
      // `atrium serve` failed with "atrium: Invalid URL" and exit 1 on the first four (ioredis
      // parsing it), and started on the last three, then ended on an unhandled `SELECT NaN`
      // error once connected. A password in it is not repeated.
      ...[
        'cache:6379',
        'http://cache:6379',
        'redis://cache:port',
        'redis://:secret@cache:99999',
        'redis://:secret@cache:6379/zero',
        'redis://cache:6379/0/1',
        'redis:///0',
      ].map(
        (url) =>
          [
            { REDIS_URL: url },
            'REDIS_URL must be a redis:// or rediss:// URL with a host, and a database number if any (such as redis://:PASSWORD@127.0.0.1:6379/0)',
          ] as const,
      ),
    ] as const) {
      const before = { ...process.env };
      Object.assign(process.env, settings);
      output.err = [];
      try {
        // Before: pino's or Node's raw message, exit 1.
        expect(await main(['migrate']), JSON.stringify(settings)).toBe(2);
        expect(output.err).toEqual([`atrium: ${message}`]);
      } finally {
        for (const name of Object.keys(settings)) {
          if (before[name] === undefined) delete process.env[name];
          else process.env[name] = before[name];
        }
      }
    }
  });

  it('refuses an empty signing-secret file (a crash between creating and writing it) with exit 2', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-secret-'));
    const before = process.env.ATRIUM_DATA_DIR;
    try {
      writeFileSync(path.join(dataDir, 'signing-secret'), '');
      process.env.ATRIUM_DATA_DIR = dataDir;
      output.err = [];
      // Before: served with an empty HMAC key, so anyone could sign URLs for any tenant. Refused
      // before anything is opened or listened on.
      expect(await main(['serve'])).toBe(2);
      expect(output.err).toEqual([
        `atrium: ${path.join(dataDir, 'signing-secret')} holds no signing secret (it is empty): delete it to have a new one generated (URLs signed before stop working), or set ATRIUM_SIGNING_SECRET`,
      ]);
      // A command that signs no URL does not read it.
      expect(await main(['migrate'])).toBe(0);
    } finally {
      process.env.ATRIUM_DATA_DIR = before;
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('keeps the secret of the process that made the signing-secret file first when two start at once', () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-secret-'));
    const file = path.join(dataDir, 'signing-secret');
    const winner = randomBytes(32).toString('base64url');
    const link = fs.linkSync;
    // The other process makes the file after this one found none, just before this one's link.
    const linkSync = vi.spyOn(fs, 'linkSync').mockImplementationOnce((from, to) => {
      writeFileSync(file, `${winner}\n`);
      link(from, to);
    });
    try {
      // Before: this process overwrote the file and kept its own secret, so URLs signed by one
      // process were refused by the other.
      expect(loadConfig({ ATRIUM_DATA_DIR: dataDir }).signingSecret).toBe(winner);
      expect(readFileSync(file, 'utf8')).toBe(`${winner}\n`);
      expect(readdirSync(dataDir)).toEqual(['signing-secret']);
      // A later start reads the same one.
      expect(loadConfig({ ATRIUM_DATA_DIR: dataDir }).signingSecret).toBe(winner);
    } finally {
      linkSync.mockRestore();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('generates a signing secret once, whole, readable by the owner only', () => {
    const dataDir = path.join(mkdtempSync(path.join(tmpdir(), 'atrium-secret-')), 'data');
    try {
      const { signingSecret } = loadConfig({ ATRIUM_DATA_DIR: dataDir });
      expect(signingSecret).toMatch(/^[\w-]{43}$/);
      expect(fs.statSync(path.join(dataDir, 'signing-secret')).mode & 0o777).toBe(0o600);
      expect(readdirSync(dataDir)).toEqual(['signing-secret']);
      expect(loadConfig({ ATRIUM_DATA_DIR: dataDir }).signingSecret).toBe(signingSecret);
    } finally {
      rmSync(path.dirname(dataDir), { recursive: true, force: true });
    }
  });

  it('keeps an idle timeout derived from a long upstream timeout within what a timer can wait', () => {
    const config = loadConfig({ ...process.env, ATRIUM_UPSTREAM_TIMEOUT_MS: '2147450000' });
    expect(config.http.idleTimeoutMs).toBe(2147483647);
  });

  it('takes ATRIUM_PUBLIC_URL with a path prefix, without its trailing slash, or an empty query or fragment', () => {
    const publicUrl = (url: string) => loadConfig({ ...process.env, ATRIUM_PUBLIC_URL: url }).publicUrl;
    expect(publicUrl('https://Example.test/atrium/')).toBe('https://example.test/atrium');
    // Signed URLs are this and a path: a bare `?` or `#` kept would end them up after it.
    expect(publicUrl('https://example.test/?')).toBe('https://example.test');
    expect(publicUrl('https://example.test/#')).toBe('https://example.test');
  });

  it('takes ATRIUM_API_KEY_HEADER in any case and with spaces around it, as the lower-case name', () => {
    expect(loadConfig({ ...process.env, ATRIUM_API_KEY_HEADER: ' X-Api-Key ' }).apiKeyHeader).toBe(
      'x-api-key',
    );
  });

  it('reads flags in any case: FALSE and False mean false, as they did for S3_FORCE_PATH_STYLE', () => {
    const forcePathStyle = (value: string) => {
      const { storage } = loadConfig({
        ...process.env,
        ATRIUM_STORAGE: 's3',
        S3_BUCKET: 'b',
        S3_FORCE_PATH_STYLE: value,
      });
      return storage.kind === 's3' && storage.forcePathStyle;
    };
    expect(['False', 'FALSE', ' false '].map(forcePathStyle)).toEqual([false, false, false]);
    expect(['TRUE', 'True', '1'].map(forcePathStyle)).toEqual([true, true, true]);
  });

  it('reads S3_REGION without the spaces around it; blank, it is unset (us-east-1)', () => {
    const region = (value: string) => {
      const { storage } = loadConfig({
        ...process.env,
        ATRIUM_STORAGE: 's3',
        S3_BUCKET: 'b',
        S3_REGION: value,
      });
      return storage.kind === 's3' && storage.region;
    };
    // Before: " " and " eu-west-1 " were taken as they were, and every storage request failed.
    expect([' ', '', ' eu-west-1 ', 'auto', 'US-EAST-1'].map(region)).toEqual([
      'us-east-1',
      'us-east-1',
      'eu-west-1',
      'auto',
      'US-EAST-1',
    ]);
  });

  it('warns, naming them, of S3 settings that ATRIUM_STORAGE left unused (files go to the data dir)', () => {
    const warnings = (env: Record<string, string>) =>
      loadConfig({ ATRIUM_DATA_DIR: dir, ATRIUM_SIGNING_SECRET: 'x'.repeat(32), ...env }).warnings;
    // Before: served from the data dir without a word, every file bound for the bucket.
    expect(
      warnings({
        S3_BUCKET: 'atrium',
        S3_ENDPOINT: 'http://minio:9000',
        S3_SECRET_ACCESS_KEY: 'never-shown',
      }),
    ).toEqual([
      'S3_ENDPOINT, S3_BUCKET, S3_SECRET_ACCESS_KEY are set but ATRIUM_STORAGE is not: files are stored in the data dir (ATRIUM_STORAGE=fs). Set ATRIUM_STORAGE=s3 to store them in S3, or ATRIUM_STORAGE=fs to keep them here without this warning',
    ]);
    expect(warnings({ S3_BUCKET: 'atrium', ATRIUM_STORAGE: 's3' })).toEqual([]);
    expect(warnings({ S3_BUCKET: 'atrium', ATRIUM_STORAGE: 'fs' })).toEqual([]);
    expect(warnings({ S3_BUCKET: ' ' })).toEqual([]);
    expect(warnings({})).toEqual([]);
  });

  it('lists shape problems even where the file is too malformed to follow its references', async () => {
    const file = writeSetup('odd.yaml', 'organizations: 5\nbogus: 1\n');
    const text = await refusedApply(file);
    expect(text).toContain('organizations');
    expect(text).toContain('bogus');
  });

  it('reports reference problems (unknown user, model, sub-agent) with their paths', async () => {
    const file = writeSetup(
      'refs.yaml',
      `
organizations:
  - id: org_y
    name: Y
    users: [{ id: usr_b, name: B, email: b@y.test }]
    workspaces:
      - id: wsp_y
        name: Y
        models: [nope]
        members: [{ user: usr_ghost, role: owner }]
        agents:
          - { title: Lead, orchestration: { agents: [agt_missing] } }
`,
    );
    const text = await refusedApply(file);
    expect(text).toContain('organizations[0].workspaces[0].models[0]: unknown model "nope"');
    expect(text).toContain('organizations[0].workspaces[0].members[0].user: unknown user "usr_ghost"');
    expect(text).toContain('organizations[0].workspaces[0].agents[0].orchestration.agents[0]');
  });

  it('refuses a workspace key whose user is not a member; takes built-in model ids without a definition', async () => {
    const file = writeSetup(
      'members.yaml',
      `
organizations:
  - id: org_m
    name: M
    users:
      - { id: usr_in, name: In, email: in@m.test }
      - { id: usr_out, name: Out, email: out@m.test }
    workspaces:
      - id: wsp_m
        name: M
        models: [openai/gpt-4o-mini, anthropic/claude-haiku-4-5]
        defaultModel: openai/gpt-4o-mini
        members: [{ user: in@m.test, role: owner }]
        apiKeys:
          - { name: by-email-member, user: usr_in }
          - { name: outsider, user: usr_out }
        agents:
          - { title: Helper, model: anthropic/claude-haiku-4-5 }
`,
    );
    const text = await refusedApply(file);
    expect(text).toContain('organizations[0].workspaces[0].apiKeys[1].user: "usr_out" is not a member');
    // Only that problem: the member named by email is the key's user named by id, and the
    // built-in providers' model ids need no definition.
    expect(text).not.toContain('apiKeys[0]');
    expect(text).not.toContain('unknown model');
  });

  it('answers a file that is not YAML, or missing, with exit code 2', async () => {
    expect(await main(['apply', writeSetup('broken.yaml', 'organizations: [unclosed')])).toBe(2);
    expect(await main(['apply', path.join(dir, 'missing.yaml')])).toBe(2);
    expect(await main(['apply'])).toBe(2);
    expect(await main(['frobnicate'])).toBe(2);
  });

  // Windows editors save UTF-16 with a byte-order mark; read as UTF-8 it was a riddle of
  // U+FFFD and NUL characters for the YAML parser.
  it('refuses a setup file in UTF-16 with exit 2, saying it must be UTF-8, and applies nothing', async () => {
    const before = await countRows();
    const file = path.join(dir, 'utf16.yaml');
    writeFileSync(
      file,
      Buffer.concat([
        Buffer.from([0xff, 0xfe]),
        Buffer.from('organizations:\n  - { name: Utf16 }\n', 'utf16le'),
      ]),
    );
    output.err = [];
    expect(await main(['apply', file])).toBe(2);
    expect(output.err).toEqual([
      `atrium: ${file} is invalid; nothing was applied:`,
      `atrium: ${file}: (file): ${file} is UTF-16 (it starts with a UTF-16 byte-order mark): the setup file must be UTF-8`,
    ]);
    expect(await countRows()).toEqual(before);
  });

  it('prints setup-file errors as lines starting "atrium: ", file and path after it, like its other errors', async () => {
    // Before: compiler-style `FILE: path: message` lines (and a header) without the prefix.
    const odd = writeSetup('prefixed.yaml', 'organizations: 5\nbogus: 1\n');
    output.err = [];
    expect(await main(['apply', odd])).toBe(2);
    expect(output.err).toEqual([
      `atrium: ${odd} is invalid; nothing was applied:`,
      `atrium: ${odd}: bogus: is not a known field`,
      `atrium: ${odd}: organizations: must be array`,
    ]);
    const missing = path.join(dir, 'missing-prefixed.yaml');
    output.err = [];
    expect(await main(['apply', missing])).toBe(2);
    expect(output.err).toEqual([
      `atrium: ${missing}: cannot read: ENOENT: no such file or directory, open '${missing}'`,
    ]);
    const broken = writeSetup('broken-prefixed.yaml', 'organizations: [unclosed');
    output.err = [];
    expect(await main(['apply', broken])).toBe(2);
    expect(output.err).toHaveLength(2);
    expect(output.err[0]).toBe(`atrium: ${broken} is invalid; nothing was applied:`);
    expect(output.err[1]).toContain(`atrium: ${broken}: (file): `);
    expect(output.err[1]).toMatch(/^atrium: .* is not valid YAML: .* at line 1, column \d+$/);
  });

  it('prints a bad setting (exit 2) and an unreachable database (exit 1) as one "atrium: " line', async () => {
    const before = process.env.DATABASE_URL;
    try {
      process.env.DATABASE_URL = 'mysql://127.0.0.1/atrium';
      output.err = [];
      expect(await main(['migrate'])).toBe(2);
      expect(output.err).toEqual([
        'atrium: DATABASE_URL must be a postgres:// URL (unset it to use the embedded SQLite)',
      ]);
      // Nothing listens on port 1. Before: main rejected and bin/atrium printed the bare message.
      process.env.DATABASE_URL = 'postgres://postgres@127.0.0.1:1/atrium';
      output.err = [];
      expect(await main(['migrate'])).toBe(1);
      expect(output.err).toEqual(['atrium: connect ECONNREFUSED 127.0.0.1:1']);
    } finally {
      if (before === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = before;
    }
  });

  it('refuses a DATABASE_URL that is no URL as a bad setting (exit 2, naming it), without repeating it', async () => {
    const before = process.env.DATABASE_URL;
    try {
      // Before: "atrium: Invalid URL" and exit 1, as if the database were down.
      for (const url of [
        'postgres://atrium:s3cret@[db.internal/atrium',
        'postgres://atrium:s3cret@127.0.0.1:port/atrium',
      ]) {
        process.env.DATABASE_URL = url;
        output.err = [];
        expect(await main(['migrate']), url).toBe(2);
        expect(output.err).toEqual([
          'atrium: DATABASE_URL must be a postgres:// URL (unset it to use the embedded SQLite): it could not be read as a URL',
        ]);
      }
      // What PostgreSQL's client takes stays taken: a space in the password, no host (a socket).
      for (const url of ['postgres://atrium:a b@127.0.0.1:1/atrium', 'postgres://atrium@/atrium']) {
        expect(loadConfig({ ...process.env, DATABASE_URL: url }).database, url).toMatchObject({ url });
      }
    } finally {
      if (before === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = before;
    }
  });

  it('reads a number setting only as decimal digits: not hex (PORT=0x50 listened on 80), and blank is unset, not 0', () => {
    const settings = (values: Record<string, string>) => loadConfig({ ...process.env, ...values });
    for (const [name, raw, range] of [
      ['PORT', '0x50', 'from 0 to 65535'],
      ['PORT', '1e3', 'from 0 to 65535'],
      ['ATRIUM_RATE_LIMIT_PER_MINUTE', '0b11', '≥ 0'],
      ['ATRIUM_MAX_CONCURRENT_REPLIES', '+5', '≥ 1'],
      ['ATRIUM_SWEEP_INTERVAL_MS', '600000.0', 'from 0 to 2147483647'],
    ] as const) {
      expect(() => settings({ [name]: raw }), `${name}=${raw}`).toThrow(
        new ConfigError(`${name} must be an integer ${range}, got "${raw}"`),
      );
    }
    // Number(" ") is 0: a blank value turned the rate limit off and listened on any port.
    const blank = settings({ PORT: ' ', ATRIUM_RATE_LIMIT_PER_MINUTE: '\t', ATRIUM_SWEEP_INTERVAL_MS: '  ' });
    expect([blank.port, blank.defaultRateLimitPerMinute, blank.sweepIntervalMs]).toEqual([
      3000, 600, 600_000,
    ]);
    // White space around the digits is taken, as it is around a flag.
    expect(settings({ PORT: ' 8080 ' }).port).toBe(8080);
  });

  it('refuses arguments to serve, migrate and demo, which take none (migrate --dry-run migrated)', async () => {
    for (const args of [
      ['migrate', '--dry-run'],
      ['demo', '--json'],
      ['serve', '--port', '4000'],
    ]) {
      output.err = [];
      expect(await main(args), args.join(' ')).toBe(2);
      expect(output.err[0]).toBe(`atrium: ${args[0]} takes no arguments, got "${args.slice(1).join(' ')}"`);
      expect(output.err.join('\n')).toContain('Usage: atrium <command>');
    }
  });

  it('words a runtime failure on one line, even one whose message is empty or runs over lines', () => {
    const refused = (address: string) =>
      Object.assign(new Error(`connect ECONNREFUSED ${address}`), { code: 'ECONNREFUSED' });
    // What Node 20 gives for `localhost` when both ::1 and 127.0.0.1 refuse: an empty message.
    const both = Object.assign(new AggregateError([refused('::1:1'), refused('127.0.0.1:1')], ''), {
      code: 'ECONNREFUSED',
    });
    expect(failureMessage(both)).toBe('connect ECONNREFUSED ::1:1; connect ECONNREFUSED 127.0.0.1:1');
    expect(failureMessage(Object.assign(new Error(''), { code: 'EPIPE' }))).toBe('EPIPE');
    expect(failureMessage(new Error('first\n  second'))).toBe('first second');
    expect(failureMessage('thrown text')).toBe('thrown text');
  });

  it('suggests the port after the one in use, and the 1024 rule only for a port under 1024', () => {
    const failed = (code: string) => Object.assign(new Error(code), { code });
    // It said PORT=3001 whatever the port was (a newcomer on 3001 itself was told 3002).
    expect(listenFailureHint(failed('EADDRINUSE'), 8080)).toBe(
      'another process is listening on port 8080: stop it, or start on another port (PORT=8081 npm start, or PORT=8081 ./bin/atrium serve)',
    );
    expect(listenFailureHint(failed('EACCES'), 80)).toBe(
      'this user may not listen on port 80: pick one from 1024 up (PORT=3001 npm start, or PORT=3001 ./bin/atrium serve)',
    );
    // Refused above 1024 (a reserved range, a security policy): "pick one from 1024 up" misled.
    const refused = listenFailureHint(failed('EACCES'), 8080)!;
    expect(refused).toBe(
      'the system refused port 8080 to this user: start on another port (PORT=8081 npm start, or PORT=8081 ./bin/atrium serve)',
    );
    expect(listenFailureHint(failed('EADDRINUSE'), 65535)).toContain('(PORT=65534 npm start');
    expect(listenFailureHint(failed('ENOTFOUND'), 8080)).toBeUndefined();
  });

  it('reports a file that is not YAML by line and column, without quoting it (it may hold a key)', async () => {
    const secret = 'sk-provider-SECRET-0123456789';
    for (const [name, text, line] of [
      ['quote.yaml', `providers:\n  - { id: local, type: openai, apiKey: "${secret} }\n`, 3],
      // The parser's own message quotes a block scalar's header.
      ['header.yaml', `providers:\n  - id: local\n    type: openai\n    apiKey: |${secret}\n`, 4],
    ] as const) {
      output.err = [];
      const printed = await refusedApply(writeSetup(name, text));
      expect(printed).toMatch(new RegExp(`is not valid YAML: .* at line ${line}, column \\d+`));
      expect(printed).not.toContain(secret);
    }
    // Valid YAML, but `key:"…"` without its space is one unknown field, named by the file's text.
    for (const [name, text] of [
      [
        'org-key.yaml',
        `organizations:\n  - name: Acme\n    users:\n      - { name: O, email: o@acme.test }\n    apiKeys:\n      - { name: acme-org, user: o@acme.test, key:"atr_org_${secret}" }\n`,
      ],
      ['provider.yaml', `providers:\n  - { id: local, type: openai, apiKey:${secret} }\n`],
    ] as const) {
      output.err = [];
      const printed = await refusedApply(writeSetup(name, text));
      expect(printed).toContain('has a field that is not a known field (not repeated: it may hold a key)');
      expect(printed).not.toContain(secret);
    }
  });

  it('refuses two objects of one name in one scope where one has no id (apply finds it by name)', async () => {
    const file = writeSetup(
      'names.yaml',
      `
organizations:
  - id: org_n
    name: N
    workspaces:
      - name: Main
        projects:
          - { name: Notes, description: first }
          - { name: Notes, description: second }
          - { id: prj_a, name: Both have ids }
          - { id: prj_b, name: Both have ids }
      - { id: wsp_n, name: Main }
  - name: N
`,
    );
    const text = await refusedApply(file);
    expect(text).toContain(
      'organizations[0].workspaces[0].projects[1].name: duplicate project name in organizations[0].workspaces[0] "Notes" (first at organizations[0].workspaces[0].projects[0].name)',
    );
    expect(text).toContain(
      'organizations[0].workspaces[1].name: duplicate workspace name in organizations[0] "Main" (first at organizations[0].workspaces[0].name)',
    );
    expect(text).toContain(
      'organizations[1].name: duplicate organization name "N" (first at organizations[0].name)',
    );
    // Found by their ids, two projects may share a name, as over the API.
    expect(text).not.toContain('Both have ids');
  });

  it('refuses two keys with one plaintext, naming both without repeating the key', async () => {
    const key = 'atr_ws_fixture_same_00000000000000000000000000';
    const file = writeSetup(
      'same-key.yaml',
      `
organizations:
  - id: org_k
    name: K
    users: [{ id: usr_k, name: K, email: k@k.test }]
    apiKeys: [{ name: one, user: usr_k, key: "${key}" }]
    workspaces:
      - id: wsp_k
        name: K
        apiKeys: [{ name: two, user: usr_k, key: "${key}" }]
`,
    );
    const text = await refusedApply(file);
    expect(text).toContain(
      'organizations[0].workspaces[0].apiKeys[0].key: is the same key as organizations[0].apiKeys[0].key',
    );
    expect(text).not.toContain(key);
  });

  it('applies a setup file, and applying it again changes nothing', async () => {
    const file = writeSetup(
      'tenancy.yaml',
      `${TENANCY_SETUP}\n      - { id: wsp_gen, name: Generated, members: [{ user: usr_gina, role: owner }], apiKeys: [{ name: generated-key, user: usr_gina }] }\n`,
    );
    expect(await main(['apply', file, '--json'])).toBe(0);
    const first = JSON.parse(output.out.join(''));
    expect(first.keys['main-owner']).toBe(KEYS.mainOwner);
    expect(first.keys['generated-key']).toMatch(/^atr_ws_[A-Za-z0-9_-]{43}$/);
    expect(first.ids.workspaces.Main).toBe('wsp_main');
    const afterFirst = await countRows();

    output.out = [];
    expect(await main(['apply', file, '--json'])).toBe(0);
    const second = JSON.parse(output.out.join(''));
    expect(second.keys).toEqual({});
    expect(await countRows()).toEqual(afterFirst);

    output.out = [];
    expect(await main(['apply', file])).toBe(0);
    expect(output.out.join('\n')).toContain('nothing to change');
  });

  it('lists with --json every object it applied, with its scope, when names repeat across workspaces', async () => {
    const twin = (letter: string) => `
  - name: Twin ${letter}
    users: [{ name: Tess, email: tess@twin-${letter.toLowerCase()}.test }]
    workspaces:
      - name: Main
        agents: [{ title: Helper }]
        projects: [{ name: Docs }]`;
    const file = writeSetup(
      'twins.yaml',
      `organizations:${twin('A')}${twin('B')}
        apiKeys: [{ name: twin-b-key, user: tess@twin-b.test }]
        members: [{ user: tess@twin-b.test, role: owner }]
  - id: org_twin_c
    name: Twin C
    workspaces:
      - id: wsp_twin_c
        name: Twin C
        projects: [{ id: prj_twin_c1, name: Docs }, { id: prj_twin_c2, name: Docs }]
`,
    );
    expect(await main(['apply', file, '--json'])).toBe(0);
    const report = JSON.parse(output.out.join(''));

    const database = await openDatabase(loadConfig().database);
    try {
      const rows = await database.db
        .selectFrom('agents')
        .innerJoin('workspaces', 'workspaces.id', 'agents.workspace_id')
        .innerJoin('organizations', 'organizations.id', 'workspaces.organization_id')
        .select(['agents.id', 'agents.workspace_id', 'organizations.id as organization_id'])
        .where('organizations.name', 'in', ['Twin A', 'Twin B'])
        .execute();
      expect(rows).toHaveLength(2);
      const agents = report.objects.filter((object: { kind: string }) => object.kind === 'agent');
      expect(agents).toEqual(
        expect.arrayContaining(
          rows.map((row) => ({
            kind: 'agent',
            id: row.id,
            name: 'Helper',
            organization: row.organization_id,
            workspace: row.workspace_id,
          })),
        ),
      );
    } finally {
      await database.close();
    }
    const named = (kind: string, name: string) =>
      report.objects.filter(
        (object: { kind: string; name: string }) => object.kind === kind && object.name === name,
      );
    expect(named('workspace', 'Main')).toHaveLength(2);
    expect(named('project', 'Docs')).toHaveLength(4);
    expect(named('project', 'Docs').map((object: { id: string }) => object.id)).toEqual(
      expect.arrayContaining(['prj_twin_c1', 'prj_twin_c2']),
    );
    expect(named('apiKey', 'twin-b-key')).toEqual([
      expect.objectContaining({ id: report.ids.apiKeys['twin-b-key'], workspace: expect.any(String) }),
    ]);
    expect(named('organization', 'Twin C')).toEqual([
      { kind: 'organization', id: 'org_twin_c', name: 'Twin C' },
    ]);
    expect(named('user', 'tess@twin-a.test')).toEqual([
      {
        kind: 'user',
        id: report.ids.users['tess@twin-a.test'],
        name: 'tess@twin-a.test',
        organization: expect.any(String),
      },
    ]);
    // A name that names two objects of a kind is left out of `ids`, which would hold one of them.
    expect(report.ids.agents).toEqual({});
    expect(report.ids.workspaces).toEqual({ 'Twin C': 'wsp_twin_c' });
    expect(report.ids.projects).toEqual({});
    expect(report.ids.organizations).toEqual({
      'Twin A': named('organization', 'Twin A')[0].id,
      'Twin B': named('organization', 'Twin B')[0].id,
      'Twin C': 'org_twin_c',
    });
  });

  it('creates and revokes keys from the command line', async () => {
    expect(
      await main([
        'keys',
        'create',
        '--workspace',
        'wsp_main',
        '--user',
        'usr_max',
        '--name',
        'cli',
        '--json',
      ]),
    ).toBe(0);
    const created = JSON.parse(output.out.join(''));
    expect(created.key).toMatch(/^atr_ws_/);
    expect(
      await main(['keys', 'create', '--organization', 'org_acme', '--user', 'usr_olivia', '--json']),
    ).toBe(0);
    expect(await main(['keys', 'create', '--workspace', 'wsp_main', '--user', 'usr_gina'])).toBe(2);
    // A user of the organization who is not a member of the workspace: such a key would never work.
    expect(await main(['keys', 'create', '--workspace', 'wsp_other', '--user', 'usr_max'])).toBe(2);
    expect(await main(['keys', 'create', '--workspace', 'wsp_main'])).toBe(2);
    // The API's rules for a name: 1–100 characters on one line, one that shows, one live key of a name.
    const withName = (name: string) =>
      main(['keys', 'create', '--workspace', 'wsp_main', '--user', 'usr_max', '--name', name]);
    for (const name of [
      '',
      '   ',
      'n'.repeat(101),
      'a\nb',
      'tab\there',
      '\u200b',
      'a\u2028b',
      '\u3164',
      '\u034f',
    ])
      expect(await withName(name), JSON.stringify(name)).toBe(2);
    output.err.length = 0;
    expect(await withName('cli')).toBe(2);
    expect(output.err).toEqual(['atrium: A key named "cli" already exists in workspace wsp_main']);
    expect(await main(['keys', 'revoke', created.id])).toBe(0);
    // Again: the same answer, as on the API (before: exit 1, a runtime failure).
    output.out.length = 0;
    expect(await main(['keys', 'revoke', created.id])).toBe(0);
    expect(output.out).toEqual([`Key ${created.id} was already revoked`]);
    // A key that is not there is a named thing that is not there: exit 2 (before: exit 1).
    output.err.length = 0;
    expect(await main(['keys', 'revoke', 'key_nope'])).toBe(2);
    expect(output.err).toEqual(['atrium: No key key_nope']);
    const database = await openDatabase(loadConfig().database);
    const row = await database.db
      .selectFrom('api_keys')
      .selectAll()
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    await database.close();
    expect(row.revoked_at).not.toBeNull();
  });

  it('creates a key that expires with --expires-at, under the API rule (in the future, at most a year away)', async () => {
    const expiresAt = new Date(Date.now() + 7 * 24 * 3600 * 1000).toISOString();
    const create = (...extra: string[]) =>
      main(['keys', 'create', '--workspace', 'wsp_main', '--user', 'usr_max', '--json', ...extra]);
    output.out.length = 0;
    expect(await create('--name', 'expiring', '--expires-at', expiresAt)).toBe(0);
    const created = JSON.parse(output.out.join(''));
    expect(
      await main([
        'keys',
        'create',
        '--organization',
        'org_acme',
        '--user',
        'usr_olivia',
        '--name',
        'org-expiring',
        '--expires-at',
        expiresAt,
      ]),
    ).toBe(0);
    output.err.length = 0;
    const nextYear = new Date().getUTCFullYear() + 1;
    for (const bad of [
      'tomorrow',
      // Date.parse reads these (the second in the machine's time zone); the API's date-time does not.
      `${nextYear}-01-01`,
      `Jan 1 ${nextYear} 10:00`,
      `${nextYear}-02-30T00:00:00Z`,
      `${nextYear}-06-30T23:59:60Z`,
      '2020-01-01T00:00:00Z',
      new Date(Date.now() + 400 * 24 * 3600 * 1000).toISOString(),
    ]) {
      expect(await create('--name', `bad-${bad}`, '--expires-at', bad), bad).toBe(2);
    }
    const notADateTime =
      'atrium: --expires-at must be a date and time with a time zone, such as 2027-01-31T00:00:00Z';
    expect(output.err).toEqual([
      notADateTime,
      notADateTime,
      notADateTime,
      notADateTime,
      'atrium: --expires-at must be a date and time with seconds up to 59',
      'atrium: --expires-at must be in the future and at most a year away',
      'atrium: --expires-at must be in the future and at most a year away',
    ]);
    const database = await openDatabase(loadConfig().database);
    const row = await database.db
      .selectFrom('api_keys')
      .select('expires_at')
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    await database.close();
    expect(new Date(row.expires_at!).toISOString()).toBe(expiresAt);
  });

  it('refuses (exit 2) a second live organization key of a name, as for workspace keys', async () => {
    const orgKey = (org: string, user: string, name: string) =>
      main(['keys', 'create', '--organization', org, '--user', user, '--name', name, '--json']);
    expect(await orgKey('org_acme', 'usr_olivia', 'ops')).toBe(0);
    const first = JSON.parse(output.out.at(-1)!);
    output.err.length = 0;
    // Before: a second key of the name was made, and a setup file naming it matched either one.
    expect(await orgKey('org_acme', 'usr_max', 'ops')).toBe(2);
    expect(output.err).toEqual(['atrium: A key named "ops" already exists in organization org_acme']);
    // The setup file's key holds its name too.
    expect(await orgKey('org_acme', 'usr_olivia', 'acme-org')).toBe(2);
    // A name is taken within one organization, among its organization keys only.
    expect(await orgKey('org_globex', 'usr_gina', 'ops')).toBe(0);
    expect(
      await main(['keys', 'create', '--workspace', 'wsp_main', '--user', 'usr_max', '--name', 'ops']),
    ).toBe(0);
    // A revoked key no longer holds its name.
    expect(await main(['keys', 'revoke', first.id])).toBe(0);
    expect(await orgKey('org_acme', 'usr_max', 'ops')).toBe(0);
  });

  it('refuses `demo` on a database that is not empty', async () => {
    output.err = [];
    expect(await main(['demo'])).toBe(2);
    expect(output.err).toEqual([
      'atrium: The database is not empty; `atrium demo` only runs on an empty one.',
    ]);
  });
});

describe.skipIf(testDatabaseUrl)('an embedded database that cannot be opened', () => {
  it('names the file: a data dir that is a file, or a file that is not a database', async () => {
    const holder = mkdtempSync(path.join(tmpdir(), 'atrium-bad-data-'));
    const before = process.env.ATRIUM_DATA_DIR;
    try {
      const notADir = path.join(holder, 'not-a-dir');
      fs.writeFileSync(notADir, 'a file');
      const notADb = path.join(holder, 'corrupt');
      fs.mkdirSync(notADb);
      fs.writeFileSync(path.join(notADb, 'atrium.sqlite'), 'x'.repeat(4096));
      for (const [dataDir, fault] of [
        [notADir, 'unable to open database file'],
        [notADb, 'file is not a database'],
      ] as const) {
        process.env.ATRIUM_DATA_DIR = dataDir;
        output.err = [];
        expect(await main(['migrate']), dataDir).toBe(1);
        expect(output.err.join('\n')).toBe(`atrium: ${fault}: ${path.join(dataDir, 'atrium.sqlite')}`);
      }
    } finally {
      process.env.ATRIUM_DATA_DIR = before;
      rmSync(holder, { recursive: true, force: true });
    }
  });
});

// Last in the file: on PostgreSQL it runs on the database the tests above set up.
describe(`commands other than serve (${engineName})`, () => {
  it('never create the signing-secret file (nor, on PostgreSQL, the data dir): they sign no URL', async () => {
    const holder = mkdtempSync(path.join(tmpdir(), 'atrium-no-secret-'));
    const dataDir = path.join(holder, 'data');
    const secretFile = path.join(dataDir, 'signing-secret');
    const before = process.env.ATRIUM_DATA_DIR;
    process.env.ATRIUM_DATA_DIR = dataDir;
    try {
      const file = writeSetup('no-secret.yaml', TENANCY_SETUP);
      const run = async (command: string[], exitCode: number) => {
        output.out = [];
        expect(await main(command), command.join(' ')).toBe(exitCode);
        // Before: each made the data dir's signing-secret (./data/signing-secret by default), even
        // with DATABASE_URL set.
        expect(fs.existsSync(secretFile), command.join(' ')).toBe(false);
      };
      await run(['migrate'], 0);
      await run(['apply', file], 0);
      await run(
        ['keys', 'create', '--workspace', 'wsp_main', '--user', 'usr_max', '--name', 'no-secret', '--json'],
        0,
      );
      await run(['keys', 'revoke', JSON.parse(output.out.join('')).id], 0);
      await run(['export', '--workspace', 'wsp_main'], 0);
      // Refused (the database is not empty), having read the configuration all the same.
      await run(['demo'], 2);
      // SQLite keeps its database in the data dir; PostgreSQL needs nothing there.
      expect(readdirSync(holder)).toEqual(testDatabaseUrl ? [] : ['data']);
    } finally {
      process.env.ATRIUM_DATA_DIR = before;
      rmSync(holder, { recursive: true, force: true });
    }
  });
});
