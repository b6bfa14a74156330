/**
 * Issue 11 and issue 10 (item 9): reading chats back, resuming a reply, and what a streamed reply
 * costs. Atrium runs in a child process (SQLite); the fake upstream runs here and holds every
 * reply open, so streams stay in flight as long as the measurement needs.
 *   - GET /v1/chats over 10,000 chats and GET /v1/chats/{id}/messages of a 200-message chat,
 *     each against a bare Fastify route returning the same JSON (target ≥ 50% of its throughput);
 *   - resume: GET /v1/chat/{id}/stream until the first replayed byte, against the first byte of
 *     the original stream;
 *   - memory: peak RSS per concurrent streamed reply at 100 and 300 streams against a slow
 *     upstream (target < 0.5 MB per stream), and /healthz p99 while they are open.
 */
import { readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.js';
import { migrateToLatest, openDatabase } from '../src/db/database.js';
import { applySetup } from '../src/setup/apply.js';
import type { SetupFile } from '../src/setup/validate.js';
import { startFakeUpstream } from '../test/helpers/fake-upstream.js';
import type { Report } from './run.js';
import { benchSetup, percentile } from './support/bench-setup.js';
import { load, startChildServer } from './support/load.js';

const KEY = 'atr_ws_bench_chats_key_0000000000000000000000';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const CHATS = 10_000;
const MESSAGES = 200;
const RESUMES = Number(process.env.BENCH_RESUMES ?? 50);
const STREAM_COUNTS = [100, 300];

function setup(baseURL: string): SetupFile {
  return benchSetup({ baseURL, key: KEY, agents: [{ id: 'agt_bench', title: 'Bench' }] });
}

/** Resident and peak resident memory of a process, in MB (Linux /proc). */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}

/** Resolves at the first body byte; the rest of the body is read on in the background. */
async function firstByte(response: Promise<Response>): Promise<{ response: Response; rest: Promise<void> }> {
  const res = await response;
  const reader = res.body!.getReader();
  await reader.read();
  const rest = (async () => {
    for (;;) if ((await reader.read()).done) return;
  })();
  return { response: res, rest };
}

async function seed(dataDir: string, baseURL: string) {
  const env = {
    ATRIUM_DATA_DIR: dataDir,
    ATRIUM_SIGNING_SECRET: 'bench-signing-secret-of-at-least-32-bytes',
  };
  const database = await openDatabase(loadConfig(env).database);
  await migrateToLatest(database.db);
  await applySetup(database.db, setup(baseURL), { now: new Date() });
  const start = Date.parse('2026-01-01T00:00:00.000Z');
  const at = (i: number) => new Date(start + i * 1000).toISOString();
  for (let from = 0; from < CHATS; from += 500) {
    await database.db
      .insertInto('chats')
      .values(
        Array.from({ length: 500 }, (_, k) => ({
          id: `cht_bench_${String(from + k).padStart(5, '0')}`,
          workspace_id: 'wsp_bench',
          agent_id: 'agt_bench',
          project_id: null,
          title: `Chat ${from + k}`,
          spend_usd: 0,
          client_id: null,
          created_by: 'usr_bench',
          end_user: null,
          message_count: from + k === 0 ? MESSAGES : 0,
          last_message_at: null,
          created_at: at(from + k),
          updated_at: at(from + k),
        })),
      )
      .execute();
  }
  await database.db
    .insertInto('messages')
    .values(
      Array.from({ length: MESSAGES }, (_, i) => ({
        id: `msg_bench_${i}`,
        chat_id: 'cht_bench_00000',
        workspace_id: 'wsp_bench',
        role: i % 2 === 0 ? ('user' as const) : ('assistant' as const),
        parts: JSON.stringify([{ type: 'text', text: `Message ${i}: ${'lorem ipsum '.repeat(20)}` }]),
        position: i,
        model: i % 2 === 0 ? null : 'fake-small',
        input_tokens: 10,
        output_tokens: 20,
        cost_usd: 0.00005,
        finish_reason: i % 2 === 0 ? null : 'stop',
        created_at: at(i),
      })),
    )
    .execute();
  await database.close();
  return env;
}

export async function run(report: Report) {
  const upstream = await startFakeUpstream();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-bench-chats-'));
  const env = {
    ...(await seed(dataDir, upstream.baseURL)),
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    ATRIUM_MAX_CONCURRENT_REPLIES: '1000',
  };
  const atrium = await startChildServer('atrium', env);
  const headers = { 'x-service-api-key': KEY };
  const jsonHeaders = { ...headers, 'content-type': 'application/json' };
  const routes = {
    '/v1/chats': '/v1/chats?limit=20',
    '/v1/chats/cht_bench_00000/messages': '/v1/chats/cht_bench_00000/messages?limit=200',
  };
  const payloads: Record<string, unknown> = {};
  for (const [route, url] of Object.entries(routes))
    payloads[route] = await (await fetch(atrium.url + url, { headers })).json();
  const payloadFile = path.join(dataDir, 'bare.json');
  writeFileSync(payloadFile, JSON.stringify(payloads));
  const bare = await startChildServer('bare', { BARE_PAYLOAD_FILE: payloadFile });
  const post = (id: string) =>
    fetch(`${atrium.url}/v1/chat`, {
      method: 'POST',
      headers: jsonHeaders,
      body: JSON.stringify({
        agentId: 'agt_bench',
        stream: true,
        id,
        messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
      }),
    });

  try {
    report(`${CHATS} chats, one of ${MESSAGES} messages, SQLite, ${SECONDS}s per run, 10 connections`);
    for (const [route, url] of Object.entries(routes)) {
      await load(bare.url + route, {}, 1);
      await load(atrium.url + url, headers, 1);
      const base = await load(bare.url + route, {}, SECONDS);
      const real = await load(atrium.url + url, headers, SECONDS);
      if (real.non2xx > 0 || real.errors > 0) report(`  !! ${real.non2xx} non-2xx, ${real.errors} errors`);
      const ratio = real.requestsPerSecond / base.requestsPerSecond;
      report(
        `GET ${url}: ${real.requestsPerSecond.toFixed(0)} req/s, p50 ${real.p50} ms, p99 ${real.p99} ms | bare route ${base.requestsPerSecond.toFixed(0)} req/s | ratio ${(ratio * 100).toFixed(1)}% (target ≥ 50%) ${ratio >= 0.5 ? 'PASS' : 'MISS'}`,
      );
    }

    // Resume: first byte of a replay against the first byte of the original stream.
    const original: number[] = [];
    const resumed: number[] = [];
    for (let i = 0; i < RESUMES; i++) {
      upstream.enqueue({ kind: 'held', text: 'one two three four five six', afterPieces: 2 });
      let began = performance.now();
      const first = await firstByte(post(`resume_${i}`));
      original.push(performance.now() - began);
      began = performance.now();
      const replay = await firstByte(fetch(`${atrium.url}/v1/chat/resume_${i}/stream`, { headers }));
      resumed.push(performance.now() - began);
      if (replay.response.status !== 200) report(`  !! resume answered ${replay.response.status}`);
      upstream.release();
      await Promise.all([first.rest, replay.rest]);
    }
    original.sort((a, b) => a - b);
    resumed.sort((a, b) => a - b);
    report(
      `resume (${RESUMES} replies): GET /v1/chat/{id}/stream to first replayed byte p50 ${percentile(resumed, 50).toFixed(2)} ms p99 ${percentile(resumed, 99).toFixed(2)} ms | original stream's first byte p50 ${percentile(original, 50).toFixed(2)} ms p99 ${percentile(original, 99).toFixed(2)} ms`,
    );

    // Memory per concurrent streamed reply, and /healthz while the streams are open.
    for (const count of STREAM_COUNTS) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const before = memoryOf(atrium.pid);
      for (let i = 0; i < count; i++)
        upstream.enqueue({ kind: 'held', text: 'w '.repeat(50), afterPieces: 5 });
      const streams = await Promise.all(
        Array.from({ length: count }, (_, i) => firstByte(post(`mem_${count}_${i}`))),
      );
      await new Promise((resolve) => setTimeout(resolve, 500));
      const health: number[] = [];
      for (let i = 0; i < 300; i++) {
        const began = performance.now();
        await (await fetch(`${atrium.url}/healthz`)).arrayBuffer();
        health.push(performance.now() - began);
      }
      health.sort((a, b) => a - b);
      const open = memoryOf(atrium.pid);
      upstream.release();
      await Promise.all(streams.map((stream) => stream.rest));
      const perStream = (open.rss - before.rss) / count;
      report(
        `${count} concurrent streamed replies (upstream holding): RSS ${before.rss.toFixed(0)} → ${open.rss.toFixed(0)} MB (peak ${open.peak.toFixed(0)} MB), ${perStream.toFixed(3)} MB per stream (target < 0.5) ${perStream < 0.5 ? 'PASS' : 'MISS'} | /healthz p50 ${percentile(health, 50).toFixed(2)} ms p99 ${percentile(health, 99).toFixed(2)} ms`,
      );
    }
  } finally {
    await atrium.stop();
    await bare.stop();
    await upstream.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
