/**
 * Issues 2 and 16: the authenticated, database-backed listings (projects, 50 agents, 50 skills,
 * 50 chats, the file list of a 500-file project) against a bare Fastify route that sends the
 * same bytes, measured in the same run. Target: ≥ 50% of the bare route's throughput, on SQLite
 * and on PostgreSQL when BENCH_DATABASE_URL is set (a fresh schema is created there and dropped
 * afterwards). The bare route serves the bytes of the SQLite run's responses to both. On
 * PostgreSQL a second bare route that makes one `select 1` round trip per request shows the
 * ceiling of any listing that reads the database at all, and Atrium's ratio against it.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { loadConfig } from '../src/config.js';
import { type Db, migrateToLatest, openDatabase } from '../src/db/database.js';
import { insertSkills } from '../src/db/repositories/skills.js';
import { applySetup } from '../src/setup/apply.js';
import type { SetupFile } from '../src/setup/validate.js';
import type { Report } from './run.js';
import { load, startChildServer } from './support/load.js';
import { benchOrganization } from './support/bench-setup.js';

const KEY = 'atr_ws_bench_key_000000000000000000000000000';

/** CPU time a process has used so far in user and kernel mode, in microseconds (Linux /proc; clock ticks of 10 ms). */
function cpuMicros(pid: number): { user: number; system: number } {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return { user: Number(fields[11]) * 10_000, system: Number(fields[12]) * 10_000 };
}

/**
 * The CPU time of every PostgreSQL process on this machine (the server runs here in the
 * benchmarks), by process: a pool's connections end between runs, so totals are compared per
 * process (postgresCpuSince), never as two sums.
 */
function postgresCpuMicros(): Map<number, number> {
  const byProcess = new Map<number, number>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (!stat.includes(' (postgres) ')) continue;
      const { user, system } = cpuMicros(Number(pid));
      byProcess.set(Number(pid), user + system);
    } catch {
      // The process ended meanwhile.
    }
  }
  return byProcess;
}

/** What PostgreSQL's processes used since `before`: a process started meanwhile counts whole. */
function postgresCpuSince(before: Map<number, number>): number {
  let total = 0;
  for (const [pid, now] of postgresCpuMicros()) total += now - (before.get(pid) ?? 0);
  return total;
}

type Measured = Awaited<ReturnType<typeof measure>>;

/**
 * A load run, with the server's CPU time per request it served (and the kernel's part of it),
 * and on PostgreSQL the database server's.
 */
async function measure(server: { url: string; pid: number }, url: string, headers: Record<string, string>) {
  const before = cpuMicros(server.pid);
  const postgresBefore = postgresCpuMicros();
  const result = await load(server.url + url, headers, SECONDS);
  const after = cpuMicros(server.pid);
  const requests = result.requestsPerSecond * SECONDS;
  return {
    ...result,
    cpuPerRequest: (after.user + after.system - before.user - before.system) / requests,
    systemPerRequest: (after.system - before.system) / requests,
    postgresPerRequest: postgresCpuSince(postgresBefore) / requests,
  };
}
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
/** Alternating rounds of the bare route and Atrium per listing (BENCH_ROUNDS); the median ratio is reported. */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
/** BENCH_ROUTE=skills measures only the listings whose route matches it (a regular expression), to profile one. */
const ONLY_ROUTE = process.env.BENCH_ROUTE;
const ROWS = 50;
const FILES = 500;

function setup(): SetupFile {
  return {
    organizations: [
      benchOrganization(KEY, {
        models: ['atrium/echo'],
        // Counted on every request (the shared counter is part of each request's cost), never reached.
        limits: { rateLimitPerMinute: 1_000_000_000 },
        agents: Array.from({ length: ROWS }, (_, i) => ({
          id: `agt_bench_${String(i).padStart(2, '0')}`,
          title: `Agent ${String(i).padStart(2, '0')}`,
          description: 'A benchmark agent',
          visibility: 'workspace' as const,
        })),
        projects: Array.from({ length: ROWS }, (_, i) => ({
          id: `prj_bench_${String(i).padStart(2, '0')}`,
          name: `Project ${i}`,
          description: 'A benchmark project',
        })),
      }),
    ],
  };
}

/**
 * Skills, chats and project files have no setup-file form: their rows are written directly
 * (skills through their repository, which writes each name's sort key).
 */
async function seedRows(db: Db) {
  const start = Date.parse('2026-01-01T00:00:00.000Z');
  const at = (i: number) => new Date(start + i * 1000).toISOString();
  await insertSkills(
    db,
    Array.from({ length: ROWS }, (_, i) => ({
      id: `skl_bench_${String(i).padStart(2, '0')}`,
      workspace_id: 'wsp_bench',
      name: `skill-${String(i).padStart(2, '0')}`,
      description: 'A benchmark skill that does one thing well',
      visibility: 'workspace' as const,
      owner_user_id: 'usr_bench',
      storage_path: `skills/wsp_bench/skl_bench_${String(i).padStart(2, '0')}`,
      metadata: JSON.stringify({ license: 'MIT', 'allowed-tools': ['read', 'write'] }),
      created_at: at(i),
      updated_at: at(i),
    })),
  );
  await db
    .insertInto('chats')
    .values(
      Array.from({ length: ROWS }, (_, i) => ({
        id: `cht_bench_${String(i).padStart(2, '0')}`,
        workspace_id: 'wsp_bench',
        agent_id: 'agt_bench_00',
        project_id: i % 2 === 0 ? 'prj_bench_00' : null,
        title: `Chat ${i}`,
        spend_usd: i * 0.0125,
        client_id: null,
        created_by: 'usr_bench',
        end_user: null,
        message_count: 2 * i,
        last_message_at: i === 0 ? null : at(i),
        created_at: at(i),
        updated_at: at(i),
      })),
    )
    .execute();
  for (let from = 0; from < FILES; from += 100) {
    await db
      .insertInto('project_files')
      .values(
        Array.from({ length: 100 }, (_, k) => {
          const i = from + k;
          return {
            id: `fil_bench_${String(i).padStart(3, '0')}`,
            workspace_id: 'wsp_bench',
            project_id: 'prj_bench_00',
            name: `note-${i}.md`,
            path: `docs/part-${i % 10}/note-${i}.md`,
            mime_type: 'text/markdown',
            size_bytes: 1000 + i,
            etag: `"etag-${i}"`,
            type: 'uploaded',
            created_at: at(i),
            updated_at: at(i),
            synced_at: at(i),
            // Already indexed: the indexer has nothing to do while the listing is measured.
            index_status: 'indexed' as const,
            indexed_etag: `"etag-${i}"`,
          };
        }),
      )
      .execute();
  }
}

const ROUTES = {
  '/v1/projects': '/v1/projects',
  '/v1/workspace/wsp_bench/agents': `/v1/workspace/wsp_bench/agents?limit=${ROWS}`,
  '/v1/workspace/wsp_bench/skills': `/v1/workspace/wsp_bench/skills?limit=${ROWS}`,
  '/v1/chats': `/v1/chats?limit=${ROWS}`,
  '/v1/projects/prj_bench_00/files': '/v1/projects/prj_bench_00/files',
};

/** The child server's environment for one engine, with its database set up and seeded. */
async function prepare(engine: 'sqlite' | 'postgres', dataDir: string, databaseUrl?: string) {
  const schema = engine === 'postgres' ? `bench_api_${randomBytes(4).toString('hex')}` : undefined;
  const env: Record<string, string> = {
    ATRIUM_DATA_DIR: dataDir,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    ATRIUM_SIGNING_SECRET: 'bench-signing-secret-of-at-least-32-bytes',
  };
  if (schema && databaseUrl) {
    const url = new URL(databaseUrl);
    url.searchParams.set('options', `-c search_path=${schema}`);
    env.DATABASE_URL = url.toString();
  }
  const config = loadConfig(env);
  const database = await openDatabase(
    config.database.kind === 'postgres' ? { ...config.database, url: databaseUrl!, schema } : config.database,
  );
  await migrateToLatest(database.db, schema);
  await applySetup(database.db, setup(), { now: new Date() });
  await seedRows(database.db);
  await database.close();
  const dropSchema = async () => {
    if (!schema) return;
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  };
  return { env, dropSchema };
}

export async function run(report: Report) {
  const databaseUrl = process.env.BENCH_DATABASE_URL;
  const engines = databaseUrl ? (['sqlite', 'postgres'] as const) : (['sqlite'] as const);
  const headers = { 'x-service-api-key': KEY };
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-bench-api-'));
  let bare: Awaited<ReturnType<typeof startChildServer>> | undefined;
  let bareWithRoundTrip: Awaited<ReturnType<typeof startChildServer>> | undefined;
  const payloadFile = path.join(dataDir, 'bare.json');
  const counter = process.env.REDIS_URL ? 'Redis' : 'the database';
  report(
    `${ROWS} projects / agents / skills / chats, a ${FILES}-file project; ${ROUNDS} alternating rounds of ${SECONDS}s (the median round shown), 10 connections, log level ${process.env.LOG_LEVEL ?? 'info'}, rate limit counted in ${counter}; load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  try {
    for (const engine of engines) {
      const { env, dropSchema } = await prepare(engine, path.join(dataDir, engine), databaseUrl);
      const atrium = await startChildServer('atrium', env);
      try {
        if (!bare) {
          const payloads: Record<string, string> = {};
          for (const [route, url] of Object.entries(ROUTES)) {
            payloads[route] = await (await fetch(atrium.url + url, { headers })).text();
          }
          writeFileSync(payloadFile, JSON.stringify(payloads));
          bare = await startChildServer('bare', { BARE_PAYLOAD_FILE: payloadFile });
        }
        if (engine === 'postgres' && !bareWithRoundTrip) {
          bareWithRoundTrip = await startChildServer('bare', {
            BARE_PAYLOAD_FILE: payloadFile,
            BARE_DATABASE_URL: databaseUrl!,
          });
        }
        for (const [route, url] of Object.entries(ROUTES)) {
          if (ONLY_ROUTE && !new RegExp(ONLY_ROUTE).test(route)) continue;
          const bytes = (await (await fetch(atrium.url + url, { headers })).arrayBuffer()).byteLength;
          await load(bare.url + route, {}, 1); // warm-up
          await load(atrium.url + url, headers, 1);
          // Rounds of the bare route then Atrium, alternating: on a 2-vCPU host a single pair moves
          // by ±5 points between runs; the median round's ratio is the figure.
          const rounds: Array<{ base: Measured; real: Measured; ratio: number }> = [];
          for (let round = 0; round < ROUNDS; round++) {
            const base = await measure(bare, route, {});
            const real = await measure(atrium, url, headers);
            if (real.non2xx > 0 || real.errors > 0)
              report(`  !! ${real.non2xx} non-2xx, ${real.errors} errors`);
            rounds.push({ base, real, ratio: real.requestsPerSecond / base.requestsPerSecond });
          }
          const { base, real, ratio } = [...rounds].sort((a, b) => a.ratio - b.ratio)[
            Math.floor(ROUNDS / 2)
          ]!;
          const each =
            ROUNDS > 1 ? ` (rounds: ${rounds.map((r) => (r.ratio * 100).toFixed(1)).join(' / ')}%)` : '';
          report(
            `${engine} GET ${url} (${bytes} B): ${real.requestsPerSecond.toFixed(0)} req/s, p50 ${real.p50} ms, p99 ${real.p99} ms, ${real.cpuPerRequest.toFixed(0)} µs CPU/req (${real.systemPerRequest.toFixed(0)} in the kernel) | bare route ${base.requestsPerSecond.toFixed(0)} req/s, p99 ${base.p99} ms, ${base.cpuPerRequest.toFixed(0)} µs CPU/req (${base.systemPerRequest.toFixed(0)} in the kernel) | ratio ${(ratio * 100).toFixed(1)}%${each} (target ≥ 50%) ${ratio >= 0.5 ? 'PASS' : 'MISS'}`,
          );
          if (engine === 'postgres') {
            report(
              `  PostgreSQL's own processes: ${real.postgresPerRequest.toFixed(0)} µs CPU per Atrium request`,
            );
          }
          if (bareWithRoundTrip) {
            await load(bareWithRoundTrip.url + route, {}, 1);
            const ceiling = await measure(bareWithRoundTrip, route, {});
            report(
              `  the bare route + one select 1 per request: ${ceiling.requestsPerSecond.toFixed(0)} req/s, ${ceiling.cpuPerRequest.toFixed(0)} µs CPU/req (${ceiling.systemPerRequest.toFixed(0)} in the kernel; PostgreSQL ${ceiling.postgresPerRequest.toFixed(0)}) = ${((ceiling.requestsPerSecond / base.requestsPerSecond) * 100).toFixed(1)}% of the bare route; Atrium ${((real.requestsPerSecond / ceiling.requestsPerSecond) * 100).toFixed(1)}% of it`,
            );
          }
        }
      } finally {
        await atrium.stop();
        await dropSchema();
      }
    }
    if (!databaseUrl) report('PostgreSQL: skipped (set BENCH_DATABASE_URL to measure it)');
  } finally {
    await bare?.stop();
    await bareWithRoundTrip?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
