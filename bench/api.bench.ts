/**
 * Issue 2: authenticated, database-backed list routes against a bare Fastify route that returns
 * the same JSON, measured in the same run. Target: ≥ 50% of the bare route's throughput (SQLite).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.js';
import { migrateToLatest, openDatabase } from '../src/db/database.js';
import { applySetup } from '../src/setup/apply.js';
import type { SetupFile } from '../src/setup/validate.js';
import type { Report } from './run.js';
import { load, startChildServer } from './support/load.js';

const KEY = 'atr_ws_bench_key_000000000000000000000000000';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);

export function benchSetup(): SetupFile {
  return {
    organizations: [
      {
        id: 'org_bench',
        name: 'Bench',
        users: [{ id: 'usr_bench', name: 'Bench', email: 'bench@bench.test' }],
        workspaces: [
          {
            id: 'wsp_bench',
            name: 'Bench',
            models: ['atrium/echo'],
            // Counted on every request (the shared counter is part of each request's cost), never reached.
            limits: { rateLimitPerMinute: 1_000_000_000 },
            members: [{ user: 'usr_bench', role: 'owner' }],
            apiKeys: [{ name: 'bench', user: 'usr_bench', key: KEY }],
            agents: Array.from({ length: 50 }, (_, i) => ({
              title: `Agent ${String(i).padStart(2, '0')}`,
              description: 'A benchmark agent',
              visibility: 'workspace' as const,
            })),
            projects: Array.from({ length: 50 }, (_, i) => ({
              name: `Project ${i}`,
              description: 'A benchmark project',
            })),
          },
        ],
      },
    ],
  };
}

export async function run(report: Report) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-bench-api-'));
  const env = {
    ATRIUM_DATA_DIR: dataDir,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    ATRIUM_SIGNING_SECRET: 'bench',
  };
  const database = await openDatabase(loadConfig(env).database);
  await migrateToLatest(database.db);
  await applySetup(database.db, benchSetup(), { now: new Date() });
  await database.close();

  const atrium = await startChildServer('atrium', env);
  const routes = {
    '/v1/projects': '/v1/projects',
    '/v1/workspace/wsp_bench/agents': '/v1/workspace/wsp_bench/agents?limit=50',
  };
  const headers = { 'x-service-api-key': KEY };
  const payloads: Record<string, unknown> = {};
  for (const [route, url] of Object.entries(routes)) {
    const res = await fetch(atrium.url + url, { headers });
    payloads[route] = await res.json();
  }
  const payloadFile = path.join(dataDir, 'bare.json');
  writeFileSync(payloadFile, JSON.stringify(payloads));
  const bare = await startChildServer('bare', { BARE_PAYLOAD_FILE: payloadFile });

  const counter = process.env.REDIS_URL ? 'Redis' : 'the database';
  report(
    `50 projects / 50 agents, SQLite, ${SECONDS}s per run, 10 connections, log level ${env.LOG_LEVEL}, rate limit counted in ${counter}`,
  );
  try {
    for (const [route, url] of Object.entries(routes)) {
      await load(bare.url + route, {}, 1); // warm-up
      await load(atrium.url + url, headers, 1);
      const base = await load(bare.url + route, {}, SECONDS);
      const real = await load(atrium.url + url, headers, SECONDS);
      if (real.non2xx > 0 || real.errors > 0) report(`  !! ${real.non2xx} non-2xx, ${real.errors} errors`);
      const ratio = real.requestsPerSecond / base.requestsPerSecond;
      report(
        `GET ${url}: ${real.requestsPerSecond.toFixed(0)} req/s, p50 ${real.p50} ms, p99 ${real.p99} ms | bare route ${base.requestsPerSecond.toFixed(0)} req/s, p99 ${base.p99} ms | ratio ${(ratio * 100).toFixed(1)}% (target ≥ 50%) ${ratio >= 0.5 ? 'PASS' : 'MISS'}`,
      );
    }
  } finally {
    await atrium.stop();
    await bare.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
