/**
 * Runs one server for a benchmark in its own process, so the load generator (autocannon, in the
 * parent) does not share an event loop with it. Sends `{ url }` to the parent once listening.
 *   mode "atrium": the real app on SQLite in ATRIUM_DATA_DIR (already set up by the parent), run
 *                  from dist/, the build `atrium serve` runs (`npm run bench` builds it first): the
 *                  sources as tsx runs them carry its development-time wrappers (keepNames adds a
 *                  defineProperty call to every closure created per request)
 *   mode "bare":   bare Fastify routes answering what BARE_PAYLOAD_FILE maps their path to: a string
 *                  is sent as the exact JSON bytes, anything else is serialized as Fastify does;
 *                  with BARE_DATABASE_URL, each request first waits for one `select 1` on a pool of
 *                  10 PostgreSQL connections (the least any request that reads the database pays)
 *   mode "relay":  a bare node:http relay: each POST is sent on to RELAY_UPSTREAM_URL and the
 *                  answer's bytes are written back as they arrive, one write per network read,
 *                  with no parsing at all (the least any server relaying a stream pays per token)
 * BENCH_ALLOC_PROFILE=<file> (mode "atrium"): samples every allocation, the collected ones
 * included (unlike --heap-prof, which keeps only what is still alive), and writes a
 * .heapprofile on SIGTERM: where the garbage that costs the scavenges comes from. With
 * BENCH_ALLOC_SURVIVORS=1 only what outlived a scavenge is sampled (what the collector copied or
 * promoted).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import http from 'node:http';
import { type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';
import Fastify from 'fastify';
import pg from 'pg';

const mode = process.argv[2];
if (mode === 'bare') {
  const payloads = JSON.parse(readFileSync(process.env.BARE_PAYLOAD_FILE!, 'utf8')) as Record<
    string,
    unknown
  >;
  const app = Fastify({ logger: false });
  const databaseUrl = process.env.BARE_DATABASE_URL;
  const pool = databaseUrl ? new pg.Pool({ connectionString: databaseUrl, max: 10 }) : undefined;
  for (const [path, body] of Object.entries(payloads)) {
    app.get(path, async (_request, reply) => {
      if (pool) await pool.query('select 1');
      return typeof body === 'string' ? reply.type('application/json').send(body) : body;
    });
  }
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  // Exits rather than dies on the parent's SIGTERM, so a --cpu-prof in BENCH_CHILD_ARGS is written.
  process.once('SIGTERM', () => process.exit(0));
  process.send?.({ url });
} else if (mode === 'relay') {
  const upstream = process.env.RELAY_UPSTREAM_URL!;
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    const forward = http.request(upstream, {
      method: 'POST',
      agent,
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' },
    });
    forward.on('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, { 'content-type': 'text/event-stream' });
      answer.on('data', (chunk: Buffer) => res.write(chunk));
      answer.on('end', () => res.end());
    });
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  process.send?.({ url: `http://127.0.0.1:${port}` });
} else {
  // A path in a variable: dist/ has no type declarations, the sources give the types.
  const built = { config: '../../dist/config.js', server: '../../dist/server.js' };
  const { loadConfig } = (await import(built.config)) as typeof import('../../src/config.js');
  const { startServer } = (await import(built.server)) as typeof import('../../src/server.js');
  if (process.env.BENCH_ALLOC_PROFILE) profileAllocations(process.env.BENCH_ALLOC_PROFILE);
  if (process.env.BENCH_LOOP_STALLS) watchLoopStalls(Number(process.env.BENCH_LOOP_STALLS));
  const config = loadConfig({ ...process.env, PORT: '0' });
  const { address } = await startServer(config);
  process.send?.({ url: address });
}

/**
 * BENCH_LOOP_STALLS=<ms> (mode "atrium"): a 1 ms timer notes every gap of the event loop longer
 * than <ms>, and the collector's pauses (PerformanceObserver "gc"); on SIGTERM, stderr gets how
 * much of the stalled time a pause of the collector covered, and the longest stalls; with
 * BENCH_LOOP_STALLS_FILE, every stall as JSON on the clock of a --cpu-prof profile.
 */
function watchLoopStalls(thresholdMs: number) {
  const pauses: Array<{ start: number; end: number; kind: number }> = [];
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      // A gc entry's detail is { kind, flags }; the PerformanceEntry type does not declare it.
      const kind = (entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? 0;
      pauses.push({ start: entry.startTime, end: entry.startTime + entry.duration, kind });
    }
  }).observe({ entryTypes: ['gc'] });
  const stalls: Array<{ start: number; end: number }> = [];
  let last = performance.now();
  setInterval(() => {
    const now = performance.now();
    if (now - last > thresholdMs) stalls.push({ start: last, end: now });
    last = now;
  }, 1).unref();
  // perf_hooks' gc kinds: 1 minor, 4 major, 8 incremental, 16 weak callbacks.
  const kindName = (kind: number) =>
    ({ 1: 'minor', 4: 'major', 8: 'incremental', 16: 'weak' })[kind] ?? String(kind);
  process.once('SIGTERM', () => {
    let stalled = 0;
    let covered = 0;
    const byKind: Record<string, number> = {};
    const described = stalls.map((stall) => {
      let gc = 0;
      const kinds = new Set<string>();
      for (const pause of pauses) {
        const overlap = Math.min(stall.end, pause.end) - Math.max(stall.start, pause.start);
        if (overlap <= 0) continue;
        gc += overlap;
        kinds.add(kindName(pause.kind));
        byKind[kindName(pause.kind)] = (byKind[kindName(pause.kind)] ?? 0) + overlap;
      }
      stalled += stall.end - stall.start;
      covered += gc;
      return { ...stall, gc, kinds: [...kinds].join('+') };
    });
    // Stalls on the monotonic clock in µs, the clock of a --cpu-prof profile's sample times.
    const offsetUs = Number(process.hrtime.bigint() / 1000n) - performance.now() * 1000;
    if (process.env.BENCH_LOOP_STALLS_FILE) {
      const onProfileClock = described.map((s) => ({
        ...s,
        startUs: offsetUs + s.start * 1000,
        endUs: offsetUs + s.end * 1000,
      }));
      writeFileSync(process.env.BENCH_LOOP_STALLS_FILE, JSON.stringify(onProfileClock));
    }
    const longest = [...described].sort((a, b) => b.end - b.start - (a.end - a.start)).slice(0, 15);
    process.stderr.write(
      `loop stalls > ${thresholdMs} ms: ${stalls.length}, ${stalled.toFixed(0)} ms in all, of which the collector's pauses ${covered.toFixed(0)} ms (${Object.entries(
        byKind,
      )
        .map(([kind, ms]) => `${kind} ${ms.toFixed(0)}`)
        .join(
          ', ',
        )}); all pauses: ${pauses.length}, ${pauses.reduce((sum, p) => sum + p.end - p.start, 0).toFixed(0)} ms\n` +
        longest
          .map(
            (s) =>
              `  at ${(s.start / 1000).toFixed(2)} s: ${(s.end - s.start).toFixed(1)} ms, collector ${s.gc.toFixed(1)} ms ${s.kinds}`,
          )
          .join('\n') +
        '\n',
    );
  });
}

function profileAllocations(file: string) {
  const session = new Session();
  session.connect();
  session.post('HeapProfiler.enable');
  session.post('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: process.env.BENCH_ALLOC_SURVIVORS !== '1',
  });
  // Registered before the server's own handler, which exits; a same-thread session answers
  // synchronously.
  process.once('SIGTERM', () => {
    session.post('HeapProfiler.stopSampling', (error, result) => {
      if (!error) writeFileSync(file, JSON.stringify(result.profile));
    });
  });
}
