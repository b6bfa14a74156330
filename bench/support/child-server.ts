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
 * .heapprofile on SIGTERM: where the garbage that costs the scavenges comes from.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import http from 'node:http';
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
  const config = loadConfig({ ...process.env, PORT: '0' });
  const { address } = await startServer(config);
  process.send?.({ url: address });
}

function profileAllocations(file: string) {
  const session = new Session();
  session.connect();
  session.post('HeapProfiler.enable');
  session.post('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  // Registered before the server's own handler, which exits; a same-thread session answers
  // synchronously.
  process.once('SIGTERM', () => {
    session.post('HeapProfiler.stopSampling', (error, result) => {
      if (!error) writeFileSync(file, JSON.stringify(result.profile));
    });
  });
}
