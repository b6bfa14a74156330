/**
 * Issue 3: what Atrium adds on top of the model provider. A fake OpenAI-compatible upstream runs
 * in this process; the baseline calls it directly with the same completion request Atrium
 * makes (non-streaming for JSON chat, streaming for SSE), in the same run. Targets: < 3 ms added p50 for non-streaming chat on SQLite; first
 * streamed byte within 5 ms of the upstream's; ≥ 50,000 chunks/s relayed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { LanguageModelV3, LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { consumeStream, JsonToSseTransformStream, streamText } from 'ai';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { migrateToLatest, openDatabase } from '../src/db/database.js';
import { applySetup } from '../src/setup/apply.js';
import type { SetupFile } from '../src/setup/validate.js';
import { startFakeUpstream } from '../test/helpers/fake-upstream.js';
import type { Report } from './run.js';
import {
  benchDataDir,
  benchSetup,
  interleavedRounds,
  loadAverage,
  percentile,
  timeEach,
} from './support/bench-setup.js';
import {
  type ConcurrentRun,
  concurrentStreams,
  cpuMs,
  p50,
  p99,
  p99BySecond,
  rssBytes,
  sampleRss,
  type StreamRequest,
} from './support/concurrent-streams.js';
import { startChildServer } from './support/load.js';

const KEY = 'atr_ws_bench_chat_key_00000000000000000000000';
const REQUESTS = Number(process.env.BENCH_CHAT_REQUESTS ?? 1500);
const LONG_PIECES = Number(process.env.BENCH_CHAT_PIECES ?? 100_000);
const STREAM_CLIENTS = Number(process.env.BENCH_STREAM_CLIENTS ?? 200);
const STREAM_TOKENS = Number(process.env.BENCH_STREAM_TOKENS ?? 500);
const TOKENS_PER_SECOND = 50;

function setup(baseURL: string): SetupFile {
  return benchSetup({
    baseURL,
    key: KEY,
    agents: [{ id: 'agt_bench', title: 'Bench', instructions: 'You help {{user.name}}.' }],
  });
}

/** An in-process model streaming `count` deltas as fast as it is read: the SDK's own floor. */
function instantModel(count: number): LanguageModelV3 {
  return {
    specificationVersion: 'v3',
    provider: 'bench',
    modelId: 'instant',
    supportedUrls: {},
    doGenerate: async () => {
      throw new Error('stream only');
    },
    doStream: async () => {
      let i = 0;
      const stream = new ReadableStream<LanguageModelV3StreamPart>({
        start(controller) {
          controller.enqueue({ type: 'stream-start', warnings: [] });
          controller.enqueue({ type: 'text-start', id: 't' });
        },
        pull(controller) {
          if (i < count) {
            controller.enqueue({ type: 'text-delta', id: 't', delta: `w${i++} ` });
            return;
          }
          controller.enqueue({ type: 'text-end', id: 't' });
          controller.enqueue({
            type: 'finish',
            finishReason: { unified: 'stop', raw: 'stop' },
            usage: {
              inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
              outputTokens: { total: count, text: count, reasoning: 0 },
            },
          });
          controller.close();
        },
      });
      return { stream };
    },
  };
}

/**
 * Milliseconds until the first body chunk that carries reply text, and the reply's pieces seen
 * (the long reply's `w<n> ` words, however many events carried them; else `marker`s).
 */
async function streamTimings(response: Promise<Response>, marker: string, started: number) {
  const res = await response;
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let first = Number.NaN;
  let body = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (Number.isNaN(first) && value.includes(marker)) first = performance.now() - started;
    body += value;
  }
  const total = performance.now() - started;
  const pieces = body.match(/\bw\d+ /g)?.length ?? body.split(marker).length - 1;
  return { first, chunks: pieces, total };
}

const fmt = (ms: number) => `${ms.toFixed(2)} ms`;
/** The p99 a run adds over the baseline's, while all its streams flow. */
const run99 = (run: ConcurrentRun, base: ConcurrentRun) =>
  fmt(percentile(run.allFlowing, 99) - percentile(base.allFlowing, 99));

/** Short replies timed for their server CPU, and how many are asked for at a time. */
const SHORT_REPLIES = 1000;
const SHORT_REPLY_CLIENTS = 10;

/**
 * Server CPU (ms, from /proc) per streamed reply of the fake upstream's default text, read to
 * its end: a reply's setup and finish with hardly any tokens. After 100 unmeasured ones.
 */
async function cpuPerShortReply(pid: number, request: StreamRequest): Promise<number> {
  const one = async () => {
    const res = await fetch(request.url, { method: 'POST', headers: request.headers, body: request.body });
    if (res.status !== 200) throw new Error(`answered ${res.status}: ${await res.text()}`);
    await res.text();
  };
  const replies = async (count: number) => {
    let started = 0;
    await Promise.all(
      Array.from({ length: SHORT_REPLY_CLIENTS }, async () => {
        while (started++ < count) await one();
      }),
    );
  };
  await replies(100);
  const before = cpuMs(pid);
  await replies(SHORT_REPLIES);
  return (cpuMs(pid) - before) / SHORT_REPLIES;
}

/**
 * BENCH_CHAT_ONLY=concurrent runs only the many-slow-replies part (to profile its server);
 * BENCH_CHAT_ONLY=short only the server CPU per short reply of that part; BENCH_CHAT_ONLY=sequential
 * only the parts before it (one request at a time, and the long reply).
 */
const ONLY_CONCURRENT = process.env.BENCH_CHAT_ONLY === 'concurrent';
const ONLY_SHORT = process.env.BENCH_CHAT_ONLY === 'short';
const ONLY_SEQUENTIAL = process.env.BENCH_CHAT_ONLY === 'sequential';
/** Replies each client of the steady-state run asks for, back to back. */
const STEADY_REPLIES_PER_CLIENT = 3;

export async function run(report: Report) {
  const upstream = await startFakeUpstream();
  if (ONLY_CONCURRENT || ONLY_SHORT) {
    try {
      await concurrentReplies(report, upstream);
    } finally {
      await upstream.close();
    }
    return;
  }
  const { dataDir, config } = benchDataDir('chat');
  const database = await openDatabase(config.database);
  await migrateToLatest(database.db);
  await applySetup(database.db, setup(upstream.baseURL), { now: new Date() });
  const app = await buildApp({ config, db: database.db }, { logger: false });
  const origin = await app.listen({ port: 0, host: '127.0.0.1' });
  const atriumUrl = `${origin}/v1/chat`;
  // The OpenAI-compatible door to the same conversation machinery (issue 13).
  const openAIUrl = `${origin}/v1/openai/chat/completions`;
  const openAIBody = (stream: boolean) =>
    JSON.stringify({ model: 'agt_bench', stream, messages: [{ role: 'user', content: 'Hello there' }] });
  const upstreamUrl = `${upstream.baseURL}/chat/completions`;
  const chatBody = (stream: boolean) =>
    JSON.stringify({
      agentId: 'agt_bench',
      stream,
      messages: [{ role: 'user', parts: [{ type: 'text', text: 'Hello there' }] }],
    });
  const upstreamBody = JSON.stringify({
    model: 'small-1',
    stream: true,
    stream_options: { include_usage: true },
    temperature: 0.7,
    messages: [
      { role: 'system', content: 'You help Bench.' },
      { role: 'user', content: 'Hello there' },
    ],
  });
  const atriumHeaders = { 'content-type': 'application/json', 'x-service-api-key': KEY };
  const upstreamHeaders = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };
  // Non-streaming chat makes one non-streaming completion call; the baseline makes the same.
  const upstreamJsonBody = JSON.stringify({
    ...JSON.parse(upstreamBody),
    stream: false,
    stream_options: undefined,
  });
  const direct = async () => {
    await (
      await fetch(upstreamUrl, { method: 'POST', headers: upstreamHeaders, body: upstreamJsonBody })
    ).text();
  };
  const viaAtrium = async () => {
    const res = await fetch(atriumUrl, { method: 'POST', headers: atriumHeaders, body: chatBody(false) });
    if (res.status !== 200) throw new Error(`atrium answered ${res.status}: ${await res.text()}`);
    await res.text();
  };
  const viaOpenAI = async () => {
    const res = await fetch(openAIUrl, { method: 'POST', headers: atriumHeaders, body: openAIBody(false) });
    if (res.status !== 200) throw new Error(`atrium answered ${res.status}: ${await res.text()}`);
    await res.text();
  };

  try {
    // Warm up both paths (JIT, connection pools, prepared statements).
    await timeEach(200, direct);
    await timeEach(200, viaAtrium);
    await timeEach(200, viaOpenAI);
    upstream.requests.length = 0;

    const [base, atrium, openai] = await interleavedRounds(REQUESTS, [direct, viaAtrium, viaOpenAI], () => {
      upstream.requests.length = 0;
    });
    const [b50, b99, a50, a99] = [
      percentile(base, 50),
      percentile(base, 99),
      percentile(atrium, 50),
      percentile(atrium, 99),
    ];
    report(
      `non-streaming chat, ${REQUESTS} sequential requests: upstream direct p50 ${fmt(b50)} p99 ${fmt(b99)}; via Atrium p50 ${fmt(a50)} p99 ${fmt(a99)}; added p50 ${fmt(a50 - b50)} (target < 3 ms) p99 ${fmt(a99 - b99)}`,
    );

    const [o50, o99] = [percentile(openai, 50), percentile(openai, 99)];
    report(
      `non-streaming /v1/openai/chat/completions, same rounds: via Atrium p50 ${fmt(o50)} p99 ${fmt(o99)}; added p50 ${fmt(o50 - b50)} (target < 3 ms, /v1/chat above: ${fmt(a50 - b50)}) p99 ${fmt(o99 - b99)}`,
    );

    // Time to first reply byte, streamed.
    const firstDirect: number[] = [];
    const firstAtrium: number[] = [];
    const firstOpenAI: number[] = [];
    for (let i = 0; i < 300; i++) {
      let started = performance.now();
      firstDirect.push(
        (
          await streamTimings(
            fetch(upstreamUrl, { method: 'POST', headers: upstreamHeaders, body: upstreamBody }),
            '"content"',
            started,
          )
        ).first,
      );
      started = performance.now();
      firstAtrium.push(
        (
          await streamTimings(
            fetch(atriumUrl, { method: 'POST', headers: atriumHeaders, body: chatBody(true) }),
            '"text-delta"',
            started,
          )
        ).first,
      );
      started = performance.now();
      firstOpenAI.push(
        (
          await streamTimings(
            fetch(openAIUrl, { method: 'POST', headers: atriumHeaders, body: openAIBody(true) }),
            '{"content":"',
            started,
          )
        ).first,
      );
      upstream.requests.length = 0;
    }
    firstDirect.sort((a, b) => a - b);
    firstAtrium.sort((a, b) => a - b);
    firstOpenAI.sort((a, b) => a - b);
    const [fd, fa] = [percentile(firstDirect, 50), percentile(firstAtrium, 50)];
    report(
      `streamed reply, time to first text byte (p50 of 300): upstream direct ${fmt(fd)}; via Atrium ${fmt(fa)}; added ${fmt(fa - fd)} (target ≤ 5 ms); p99 added ${fmt(percentile(firstAtrium, 99) - percentile(firstDirect, 99))}`,
    );
    const fo = percentile(firstOpenAI, 50);
    report(
      `streamed /v1/openai/chat/completions, time to first delta.content byte (p50 of 300, same rounds): via Atrium ${fmt(fo)}; added ${fmt(fo - fd)} (target ≤ 5 ms, /v1/chat above: ${fmt(fa - fd)}); p99 added ${fmt(percentile(firstOpenAI, 99) - percentile(firstDirect, 99))}`,
    );

    // Relay rate of a long streamed reply.
    const pieces = Array.from({ length: LONG_PIECES }, (_, i) => `w${i} `);
    upstream.enqueue({ kind: 'text', text: '', pieces });
    let started = performance.now();
    const directLong = await streamTimings(
      fetch(upstreamUrl, { method: 'POST', headers: upstreamHeaders, body: upstreamBody }),
      '"content"',
      started,
    );
    upstream.enqueue({ kind: 'text', text: '', pieces });
    started = performance.now();
    const atriumLong = await streamTimings(
      fetch(atriumUrl, { method: 'POST', headers: atriumHeaders, body: chatBody(true) }),
      '"text-delta"',
      started,
    );
    started = performance.now();
    await consumeStream({
      stream: streamText({ model: instantModel(LONG_PIECES), prompt: 'x' })
        .toUIMessageStream({ originalMessages: [], onFinish: () => {} })
        .pipeThrough(new JsonToSseTransformStream())
        .pipeThrough(new TextEncoderStream()),
    });
    const floor = LONG_PIECES / ((performance.now() - started) / 1000);
    report(
      `AI SDK floor, same run: streamText → UI message stream → SSE bytes in-process (no provider, no HTTP) ${Math.round(floor)} chunks/s`,
    );
    report(
      `long streamed reply, ${LONG_PIECES} pieces: upstream direct ${Math.round(directLong.chunks / (directLong.total / 1000))} chunks/s; relayed by Atrium ${atriumLong.chunks} pieces in ${fmt(atriumLong.total)} = ${Math.round(atriumLong.chunks / (atriumLong.total / 1000))} chunks/s, ${Math.round((atriumLong.chunks / (atriumLong.total / 1000) / floor) * 100)}% of the AI SDK floor (target ≥ 50,000)`,
    );
    // The in-process server is done; the concurrent run uses a server process of its own.
    await app.close();
    if (!ONLY_SEQUENTIAL) await concurrentReplies(report, upstream);
  } finally {
    if (app.server.listening) await app.close();
    await database.close();
    await upstream.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * Issue 16: what a process pays to carry many slow replies at once. Atrium runs as a child
 * process (its CPU and memory are its own); the upstream and the clients share this process's
 * clock. The baseline is the same clients reading the upstream directly, in the same run.
 */
async function concurrentReplies(report: Report, upstream: Awaited<ReturnType<typeof startFakeUpstream>>) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-bench-chat-child-'));
  const env = {
    ATRIUM_DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    ATRIUM_SIGNING_SECRET: 'bench-signing-secret-of-at-least-32-bytes',
  };
  const database = await openDatabase(loadConfig(env).database);
  await migrateToLatest(database.db);
  await applySetup(database.db, setup(upstream.baseURL), { now: new Date() });
  await database.close();
  const atrium = await startChildServer('atrium', env);
  const relay = await startChildServer('relay', {
    RELAY_UPSTREAM_URL: `${upstream.baseURL}/chat/completions`,
  });
  const viaRelay = {
    url: `${relay.url}/chat/completions`,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'small-1',
      stream: true,
      messages: [{ role: 'user', content: 'Hello there' }],
    }),
  };
  const viaAtrium = {
    url: `${atrium.url}/v1/chat`,
    headers: { 'content-type': 'application/json', 'x-service-api-key': KEY },
    body: JSON.stringify({
      agentId: 'agt_bench',
      stream: true,
      messages: [{ role: 'user', parts: [{ type: 'text', text: 'Hello there' }] }],
    }),
  };
  const direct = {
    url: `${upstream.baseURL}/chat/completions`,
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' },
    body: JSON.stringify({
      model: 'small-1',
      stream: true,
      messages: [{ role: 'user', content: 'Hello there' }],
    }),
  };
  const shape = {
    upstream,
    clients: STREAM_CLIENTS,
    pieces: STREAM_TOKENS,
    intervalMs: 1000 / TOKENS_PER_SECOND,
    rampMs: 1000,
  };
  try {
    if (ONLY_SHORT) {
      const relaySetup = await cpuPerShortReply(relay.pid, viaRelay);
      const atriumSetup = await cpuPerShortReply(atrium.pid, viaAtrium);
      report(
        `server CPU per short reply (${SHORT_REPLIES} replies, ${SHORT_REPLY_CLIENTS} at a time, request to end): Atrium ${atriumSetup.toFixed(2)} ms, the bare relay ${relaySetup.toFixed(2)} ms (${(atriumSetup / relaySetup).toFixed(1)}×)`,
      );
      return;
    }
    // Warm-up (JIT, statement cache, connection pools) at a fifth of the load for a second,
    // each right before its run: Node answers 408 on a kept-alive connection left idle longer
    // than the headers timeout, so the client must not reuse one from long ago.
    const warm = { ...shape, clients: STREAM_CLIENTS / 5, pieces: TOKENS_PER_SECOND };
    await concurrentStreams({ ...warm, request: direct });
    const base = await concurrentStreams({ ...shape, request: direct });
    // The floor of any relay: a bare node:http server writing the upstream's bytes on as read.
    await concurrentStreams({ ...warm, request: viaRelay });
    const relayCpuBefore = cpuMs(relay.pid);
    const bare = await concurrentStreams({ ...shape, request: viaRelay });
    const relayCpu = cpuMs(relay.pid) - relayCpuBefore;
    await concurrentStreams({ ...warm, request: viaAtrium });
    const idleRss = rssBytes(atrium.pid);
    const cpuBefore = cpuMs(atrium.pid);
    const rss = sampleRss(atrium.pid);
    const relayed = await concurrentStreams({ ...shape, request: viaAtrium });
    const peakRss = rss.stop();
    const cpu = cpuMs(atrium.pid) - cpuBefore;
    // The same burst again in the same process: its heap and its pool of upstream connections
    // are now sized for 200 replies, as in a server that has carried such a load before. The
    // first run is the target's figure: the first such burst in a process's life.
    const again = await concurrentStreams({ ...shape, request: viaAtrium });
    // The steady state of the same load: each client asks again as soon as its reply ends, so
    // 200 replies run at all times and new ones come at the rate that implies (one reply's
    // length spread over the clients: 20 per second), not 200 within a second.
    const steadyShape = {
      ...shape,
      rampMs: STREAM_TOKENS * shape.intervalMs,
      repliesPerClient: STEADY_REPLIES_PER_CLIENT,
    };
    const steadyBase = await concurrentStreams({ ...steadyShape, request: direct });
    const steady = await concurrentStreams({ ...steadyShape, request: viaAtrium });
    // What one reply costs the server from request to end, apart from its tokens: the setup
    // that 200 replies asked for within a second pile up in that second.
    const relaySetup = await cpuPerShortReply(relay.pid, viaRelay);
    const atriumSetup = await cpuPerShortReply(atrium.pid, viaAtrium);
    const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MB`;
    report(
      `concurrent streamed replies, ${STREAM_CLIENTS} clients × ${STREAM_TOKENS} tokens at ${TOKENS_PER_SECOND} tokens/s (Atrium in its own process, SQLite, log level info); ${loadAverage()}`,
    );
    report(
      `  piece delay upstream write → client read: direct p50 ${fmt(p50(base))} p99 ${fmt(p99(base))}; via Atrium p50 ${fmt(p50(relayed))} p99 ${fmt(p99(relayed))}; Atrium adds p50 ${fmt(p50(relayed) - p50(base))}, p99 ${fmt(p99(relayed) - p99(base))} (target ≤ 10 ms); received ${relayed.received}/${relayed.expected} (direct ${base.received}/${base.expected})`,
    );
    const perThousand = (ms: number, run: ConcurrentRun) => ms / (run.received / 1000);
    report(
      `  the bare node:http relay (no parsing, one write per read): adds p50 ${fmt(p50(bare) - p50(base))}, p99 ${fmt(p99(bare) - p99(base))}; CPU ${perThousand(relayCpu, bare).toFixed(1)} ms per 1,000 chunks (Atrium: ${((perThousand(cpu, relayed) / perThousand(relayCpu, bare)) * 100).toFixed(0)}% of it); received ${bare.received}/${bare.expected}`,
    );
    const harness = (run: ConcurrentRun) => `${((run.harnessCpuMs / run.wallMs) * 100).toFixed(0)}%`;
    report(
      `  the load generator (the upstream and the ${STREAM_CLIENTS} clients, node:http, in the bench's process) used ${harness(base)} of a core direct, ${harness(bare)} through the bare relay, ${harness(relayed)} through Atrium`,
    );
    const flowing = (run: ConcurrentRun) =>
      run.allFlowing.length === 0
        ? 'never all at once'
        : `p50 ${fmt(percentile(run.allFlowing, 50))} p99 ${fmt(percentile(run.allFlowing, 99))} (${run.allFlowing.length} pieces)`;
    report(
      `  while all ${STREAM_CLIENTS} streams flow (from the last first piece to the first last piece: no reply starting or ending): direct ${flowing(base)}; via Atrium ${flowing(relayed)}; Atrium adds p99 ${run99(relayed, base)}`,
    );
    const firstPiece = (run: ConcurrentRun) =>
      `p50 ${fmt(percentile(run.firstPiece, 50))} p99 ${fmt(percentile(run.firstPiece, 99))}`;
    report(
      `  request sent → first piece read, per client: direct ${firstPiece(base)}; the bare relay ${firstPiece(bare)}; via Atrium ${firstPiece(relayed)} (a new reply's setup takes its turn behind the running streams)`,
    );
    report(
      `  p99 by second of the run, via Atrium (pieces): ${p99BySecond(relayed).join(', ')}; the clients start over the first second and end over the last`,
    );
    report(
      `  the same ${STREAM_CLIENTS} replies again, in the same (now warm) process: Atrium adds p50 ${fmt(p50(again) - p50(base))}, p99 ${fmt(p99(again) - p99(base))}; while all flow p99 ${run99(again, base)}; first piece p50 ${fmt(percentile(again.firstPiece, 50))}; p99 by second ${p99BySecond(again).join(', ')}; received ${again.received}/${again.expected}`,
    );
    const perSecond = (STREAM_CLIENTS / (steadyShape.rampMs / 1000)).toFixed(0);
    report(
      `  the steady state: ${STREAM_CLIENTS} clients asking for ${STEADY_REPLIES_PER_CLIENT} replies each, one after the other (${perSecond} new replies per second, ${STREAM_CLIENTS} running); while all clients are on: direct ${flowing(steadyBase)}; via Atrium ${flowing(steady)}; Atrium adds p99 ${run99(steady, steadyBase)}; whole run: Atrium adds p99 ${fmt(p99(steady) - p99(steadyBase))}; first piece p50 ${fmt(percentile(steady.firstPiece, 50))} p99 ${fmt(percentile(steady.firstPiece, 99))}; received ${steady.received}/${steady.expected}`,
    );
    report(
      `  server CPU per short reply (${SHORT_REPLIES} replies of the fake upstream's short default text, ${SHORT_REPLY_CLIENTS} at a time, request to end): Atrium ${atriumSetup.toFixed(2)} ms, the bare relay ${relaySetup.toFixed(2)} ms (${(atriumSetup / relaySetup).toFixed(1)}×); ${STREAM_CLIENTS} such setups within a second take ${((atriumSetup * STREAM_CLIENTS) / 10).toFixed(0)}% of a core`,
    );
    report(
      `  server CPU ${Math.round(cpu)} ms over ${(relayed.wallMs / 1000).toFixed(1)} s (${((cpu / relayed.wallMs) * 100).toFixed(0)}% of a core) = ${(cpu / (relayed.received / 1000)).toFixed(1)} ms per 1,000 relayed chunks; server RSS idle ${mb(idleRss)}, peak ${mb(peakRss)} → ${((peakRss - idleRss) / STREAM_CLIENTS / 1024).toFixed(0)} KB per stream`,
    );
  } finally {
    await atrium.stop();
    await relay.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
