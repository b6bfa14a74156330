/**
 * Issue 5: a 200-skill, ~30 MB zip uploaded end to end over a real listening server (multipart
 * spooled to disk, archive checked and fully inflated, every file stored, rows inserted).
 * Targets: under 2 s and under 64 MB of peak RSS growth. Baseline in the same run: inflating
 * the same archive with yauzl alone to a null sink (the floor any zip-reading upload pays).
 */
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yauzl, { type Entry, type ZipFile } from 'yauzl';
import yazl from 'yazl';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { migrateToLatest, openDatabase } from '../src/db/database.js';
import { applySetup } from '../src/setup/apply.js';
import type { SetupFile } from '../src/setup/validate.js';
import type { Report } from './run.js';

const KEY = 'atr_ws_bench_skills_owner_000000000000000000';
const SKILLS = 200;
const DATA_BYTES_PER_SKILL = 150 * 1024;
const RUNS = 3;

function benchSetup(): SetupFile {
  return {
    organizations: [
      {
        id: 'org_bench',
        name: 'Bench',
        users: [{ id: 'usr_bench', name: 'Bench', email: 'bench@bench.test' }],
        workspaces: Array.from({ length: RUNS + 1 }, (_, i) => ({
          id: `wsp_bench_${i}`,
          name: `Bench ${i}`,
          limits: { rateLimitPerMinute: 0 },
          members: [{ user: 'usr_bench', role: 'owner' as const }],
          apiKeys: [{ name: `bench-${i}`, user: 'usr_bench', key: `${KEY}${i}` }],
        })),
      },
    ],
  };
}

async function writeBenchZip(file: string): Promise<void> {
  const zip = new yazl.ZipFile();
  for (let i = 0; i < SKILLS; i++) {
    const name = `skill-${String(i).padStart(3, '0')}`;
    zip.addBuffer(
      Buffer.from(`---\nname: ${name}\ndescription: Benchmark skill ${i}\nlicense: MIT\n---\n\n# ${name}\n\nSteps.\n`),
      `skills/${name}/SKILL.md`,
    );
    zip.addBuffer(Buffer.from(`print(${i})\n`.repeat(50)), `skills/${name}/scripts/run.py`);
    // Incompressible (deflated all the same, as zip tools do), so the archive really is ~30 MB.
    zip.addBuffer(randomBytes(DATA_BYTES_PER_SKILL), `skills/${name}/assets/data.bin`);
  }
  zip.end();
  await pipeline(zip.outputStream, createWriteStream(file));
}

const heapAndBuffers = () => {
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.external;
};

/**
 * Samples memory every 5 ms while `work` runs: the peak growth of RSS (which the allocator
 * keeps after a first run, so the cold run is the telling one) and of JS heap + buffers.
 */
async function measure<T>(work: () => Promise<T>) {
  (globalThis as { gc?: () => void }).gc?.();
  const rssBefore = process.memoryUsage.rss();
  const heapBefore = heapAndBuffers();
  let rssPeak = rssBefore;
  let heapPeak = heapBefore;
  const sample = () => {
    rssPeak = Math.max(rssPeak, process.memoryUsage.rss());
    heapPeak = Math.max(heapPeak, heapAndBuffers());
  };
  const timer = setInterval(sample, 5);
  const started = performance.now();
  try {
    const result = await work();
    sample();
    return {
      result,
      ms: performance.now() - started,
      rssGrowthMb: (rssPeak - rssBefore) / 2 ** 20,
      heapGrowthMb: (heapPeak - heapBefore) / 2 ** 20,
    };
  } finally {
    clearInterval(timer);
  }
}

/** The baseline: every entry of the archive inflated by yauzl alone to a null sink. */
async function inflateAll(zipPath: string): Promise<number> {
  const zip = await new Promise<ZipFile>((resolve, reject) =>
    yauzl.open(zipPath, { lazyEntries: true, autoClose: false }, (e, z) => (e || !z ? reject(e) : resolve(z))),
  );
  let bytes = 0;
  const entries: Entry[] = await new Promise((resolve, reject) => {
    const all: Entry[] = [];
    zip.on('entry', (entry: Entry) => {
      all.push(entry);
      zip.readEntry();
    });
    zip.once('end', () => resolve(all));
    zip.once('error', reject);
    zip.readEntry();
  });
  for (const entry of entries) {
    const stream = await new Promise<NodeJS.ReadableStream>((resolve, reject) =>
      zip.openReadStream(entry, (e, s) => (e || !s ? reject(e) : resolve(s))),
    );
    await pipeline(
      stream,
      new Writable({
        write(chunk: Buffer, _encoding, callback) {
          bytes += chunk.length;
          callback();
        },
      }),
    );
  }
  zip.close();
  return bytes;
}

/** POSTs the zip as one `files` part, streamed from disk so the client holds no copy of it. */
function postMultipart(url: string, key: string, zipPath: string): Promise<{ status: number; body: string }> {
  const boundary = `----atriumbench${Date.now().toString(16)}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="files"; filename="bench.zip"\r\nContent-Type: application/zip\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const length = head.length + statSync(zipPath).size + tail.length;
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      {
        method: 'POST',
        headers: {
          'x-service-api-key': key,
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'content-length': String(length),
        },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.write(head);
    const file = createReadStream(zipPath);
    file.on('error', reject);
    file.on('end', () => request.end(tail));
    file.pipe(request, { end: false });
  });
}

export async function run(report: Report) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-bench-skills-'));
  const config = loadConfig({
    ATRIUM_DATA_DIR: dataDir,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    ATRIUM_SIGNING_SECRET: 'bench',
    ATRIUM_RATE_LIMIT_PER_MINUTE: '0',
  });
  const database = await openDatabase(config.database);
  await migrateToLatest(database.db);
  await applySetup(database.db, benchSetup(), { now: new Date() });
  const app = await buildApp({ config, db: database.db, dialect: database.dialect });
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    const zipPath = path.join(dataDir, 'bench.zip');
    await writeBenchZip(zipPath);
    const zipMb = statSync(zipPath).size / 2 ** 20;
    report(`${SKILLS} skills, ${zipMb.toFixed(1)} MB zip (3 files per skill), SQLite + fs storage, real server on ${base}`);

    // Run 1 is cold (the first upload this process serves): its RSS growth is the real peak.
    for (let i = 1; i <= RUNS; i++) {
      const baseline = await measure(() => inflateAll(zipPath));
      const upload = await measure(() =>
        postMultipart(`${base}/v1/workspace/wsp_bench_${i}/skills/bulk-upload`, `${KEY}${i}`, zipPath),
      );
      const body = JSON.parse(upload.result.body) as { data?: { summary: Record<string, number> } };
      const summary = body.data?.summary;
      const ok = upload.result.status === 200 && summary?.created === SKILLS;
      const timeOk = upload.ms < 2000;
      const rssOk = upload.rssGrowthMb < 64;
      report(
        `run ${i}${i === 1 ? ' (cold)' : ''}: bulk upload ${upload.ms.toFixed(0)} ms, peak RSS +${upload.rssGrowthMb.toFixed(1)} MB, heap+buffers +${upload.heapGrowthMb.toFixed(1)} MB (status ${upload.result.status}, created ${summary?.created ?? 0}) | baseline yauzl inflate alone ${baseline.ms.toFixed(0)} ms (${(baseline.result / 2 ** 20).toFixed(1)} MB out), RSS +${baseline.rssGrowthMb.toFixed(1)} MB | ratio ${(upload.ms / baseline.ms).toFixed(1)}× | time < 2 s ${timeOk ? 'PASS' : 'MISS'}, RSS < 64 MB ${rssOk ? 'PASS' : 'MISS'}${ok ? '' : ' !! upload failed'}`,
      );
    }
    writeFileSync(path.join(dataDir, 'done'), '');
  } finally {
    await app.close();
    await database.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
