/**
 * Issue 14: `GET /v1/workspace/{id}/usage` over a workspace with 100,000 stored messages
 * (half of them assistant replies, 1,000 chats, 10 agents, 2 models, every day of the month).
 * Target: p50 < 50 ms on SQLite, and on PostgreSQL when BENCH_DATABASE_URL is set (a fresh
 * schema is created there and dropped afterwards). In process, through `inject`: the figure is
 * the route's own time (auth, query, shaping), without the network.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { migrateToLatest, openDatabase } from '../src/db/database.js';
import type { MessageTable } from '../src/db/schema.js';
import { applySetup } from '../src/setup/apply.js';
import type { Report } from './run.js';
import { benchOrganization } from './support/bench-setup.js';

const KEY = 'atr_ws_bench_usage_key_0000000000000000000000';
const MESSAGES = 100_000;
const CHATS = 1_000;
const AGENTS = 10;
const ROUNDS = Number(process.env.BENCH_USAGE_ROUNDS ?? 200);
const MONTH = '2026-11';

async function measure(report: Report, engine: 'sqlite' | 'postgres', databaseUrl?: string) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-bench-usage-'));
  const config = loadConfig({
    ATRIUM_DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    ATRIUM_SIGNING_SECRET: 'bench-signing-secret-of-at-least-32-bytes',
  });
  const schema = databaseUrl ? `bench_${randomBytes(4).toString('hex')}` : undefined;
  if (databaseUrl) config.database = { kind: 'postgres', url: databaseUrl, schema };
  const database = await openDatabase(config.database);
  try {
    await migrateToLatest(database.db, database.schema);
    await applySetup(
      database.db,
      {
        organizations: [
          benchOrganization(KEY, {
            models: ['atrium/echo'],
            agents: Array.from({ length: AGENTS }, (_, i) => ({ id: `agt_b${i}`, title: `Agent ${i}` })),
          }),
        ],
      },
      { now: new Date() },
    );
    const db = database.db;
    const chats = Array.from({ length: CHATS }, (_, i) => ({
      id: `cht_b${i}`,
      workspace_id: 'wsp_bench',
      agent_id: `agt_b${i % AGENTS}`,
      project_id: null,
      title: `Chat ${i}`,
      spend_usd: 0,
      message_count: MESSAGES / CHATS,
      created_at: `${MONTH}-01T00:00:00.000Z`,
      updated_at: `${MONTH}-01T00:00:00.000Z`,
    }));
    for (let i = 0; i < chats.length; i += 500)
      await db
        .insertInto('chats')
        .values(chats.slice(i, i + 500))
        .execute();
    const perChat = MESSAGES / CHATS;
    const batch: MessageTable[] = [];
    for (let c = 0; c < CHATS; c++) {
      for (let p = 0; p < perChat; p++) {
        const assistant = p % 2 === 1;
        const day = String(1 + ((c + p) % 30)).padStart(2, '0');
        batch.push({
          id: `m${p}`,
          chat_id: `cht_b${c}`,
          workspace_id: 'wsp_bench',
          role: assistant ? 'assistant' : 'user',
          parts: '[{"type":"text","text":"hello"}]',
          finish_reason: assistant ? 'stop' : null,
          position: p,
          model: assistant ? (c % 2 === 0 ? 'atrium/echo' : 'local/small') : null,
          input_tokens: assistant ? 100 : 0,
          output_tokens: assistant ? 50 : 0,
          cost_usd: assistant ? 0.0002 : 0,
          created_at: `${MONTH}-${day}T12:00:00.000Z`,
        });
        // PostgreSQL takes at most 65,535 parameters per statement: 11 columns × 2,000 rows.
        if (batch.length === 2_000) await db.insertInto('messages').values(batch.splice(0)).execute();
      }
    }
    if (batch.length > 0) await db.insertInto('messages').values(batch.splice(0)).execute();

    const app = await buildApp(
      { config, db, clock: () => new Date(`${MONTH}-25T00:00:00.000Z`) },
      { logger: false },
    );
    await app.ready();
    const url = `/v1/workspace/wsp_bench/usage?month=${MONTH}`;
    const headers = { 'x-service-api-key': KEY };
    const first = await app.inject({ method: 'GET', url, headers });
    const body = first.json() as { data: { requests: number } };
    if (first.statusCode !== 200 || body.data.requests !== MESSAGES / 2) {
      report(`  !! unexpected answer ${first.statusCode}: ${first.body.slice(0, 200)}`);
    }
    const times: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const started = process.hrtime.bigint();
      await app.inject({ method: 'GET', url, headers });
      times.push(Number(process.hrtime.bigint() - started) / 1e6);
    }
    await app.close();
    times.sort((a, b) => a - b);
    const p50 = times[Math.floor(times.length / 2)]!;
    const p99 = times[Math.floor(times.length * 0.99)]!;
    report(
      `GET /v1/workspace/{id}/usage, ${MESSAGES.toLocaleString('en')} messages, ${engine}: p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms over ${ROUNDS} requests (target p50 < 50 ms) ${p50 < 50 ? 'PASS' : 'MISS'}`,
    );
  } finally {
    await database.close();
    if (databaseUrl && schema) {
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await client.end();
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function run(report: Report) {
  await measure(report, 'sqlite');
  const databaseUrl = process.env.BENCH_DATABASE_URL;
  if (databaseUrl) await measure(report, 'postgres', databaseUrl);
  else report('PostgreSQL: skipped (set BENCH_DATABASE_URL to measure it)');
}
