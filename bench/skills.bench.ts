/**
 * Issue 5: a 200-skill, ~30 MB zip uploaded end to end to a real server in its own process
 * (multipart spooled to disk, archive checked and fully inflated, every file stored, rows
 * inserted). Targets: under 2 s and under 64 MB of peak RSS growth of the server process (read
 * from /proc: VmHWM reset before each upload, against VmRSS just before it). Baseline in the
 * same run: inflating the same archive with yauzl alone to a null sink, in this process.
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
import { type ChildProcess, fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.js';
import { migrateToLatest, openDatabase } from '../src/db/database.js';
import { applySetup } from '../src/setup/apply.js';
import type { SetupFile } from '../src/setup/validate.js';
import type { Report } from './run.js';
import { loadAverage } from './support/bench-setup.js';

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
      Buffer.from(
        `---\nname: ${name}\ndescription: Benchmark skill ${i}\nlicense: MIT\n---\n\n# ${name}\n\nSteps.\n`,
      ),
      `skills/${name}/SKILL.md`,
    );
    zip.addBuffer(Buffer.from(`print(${i})\n`.repeat(50)), `skills/${name}/scripts/run.py`);
    // Incompressible (deflated all the same, as zip tools do), so the archive really is ~30 MB.
    zip.addBuffer(randomBytes(DATA_BYTES_PER_SKILL), `skills/${name}/assets/data.bin`);
  }
  zip.end();
  await pipeline(zip.outputStream, createWriteStream(file));
}

const here = path.dirname(fileURLToPath(import.meta.url));

/** `VmRSS` and `VmHWM` (peak RSS) of a process, in bytes. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

/** Resets VmHWM so that it measures from now (Linux; ignored where not permitted). */
function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/**
 * Times `work` and the peak RSS growth of process `pid` while it runs: VmHWM after (reset
 * before), or VmRSS sampled every 5 ms where the peak cannot be reset.
 */
async function measure<T>(pid: number, work: () => Promise<T>) {
  const before = memoryOf(pid).rss;
  const exactPeak = resetPeak(pid);
  let sampled = before;
  const timer = setInterval(() => {
    sampled = Math.max(sampled, memoryOf(pid).rss);
  }, 5);
  const started = performance.now();
  try {
    const result = await work();
    const ms = performance.now() - started;
    const peak = exactPeak ? memoryOf(pid).peak : Math.max(sampled, memoryOf(pid).rss);
    return { result, ms, rssGrowthMb: (peak - before) / 2 ** 20, exactPeak };
  } finally {
    clearInterval(timer);
  }
}

async function startServer(env: Record<string, string>) {
  const child: ChildProcess = fork(path.join(here, 'support', 'child-server.ts'), ['atrium'], {
    env: { ...process.env, ...env },
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (message) => resolve((message as { url: string }).url));
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  const stop = () =>
    new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  return { url, pid: child.pid!, stop };
}

/** The baseline: every entry of the archive inflated by yauzl alone to a null sink. */
async function inflateAll(zipPath: string): Promise<number> {
  const zip = await new Promise<ZipFile>((resolve, reject) =>
    yauzl.open(zipPath, { lazyEntries: true, autoClose: false }, (e, z) =>
      e || !z ? reject(e) : resolve(z),
    ),
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
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() }),
        );
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
  const env = {
    ATRIUM_DATA_DIR: dataDir,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    ATRIUM_SIGNING_SECRET: 'bench-signing-secret-of-at-least-32-bytes',
    ATRIUM_RATE_LIMIT_PER_MINUTE: '0',
  };
  const database = await openDatabase(loadConfig(env).database);
  await migrateToLatest(database.db);
  await applySetup(database.db, benchSetup(), { now: new Date() });
  await database.close();
  const server = await startServer(env);
  try {
    const zipPath = path.join(dataDir, 'bench.zip');
    await writeBenchZip(zipPath);
    const zipMb = statSync(zipPath).size / 2 ** 20;
    report(
      `${SKILLS} skills, ${zipMb.toFixed(1)} MB zip (3 files per skill, deflated), SQLite + fs storage, server in its own process; ${loadAverage()}`,
    );
    // Run 1 is the server's first upload (cold: JIT, first allocations, directories).
    for (let i = 1; i <= RUNS; i++) {
      const baseline = await measure(process.pid, () => inflateAll(zipPath));
      const upload = await measure(server.pid, () =>
        postMultipart(`${server.url}/v1/workspace/wsp_bench_${i}/skills/bulk-upload`, `${KEY}${i}`, zipPath),
      );
      const body = JSON.parse(upload.result.body) as { data?: { summary: Record<string, number> } };
      const created = body.data?.summary.created ?? 0;
      const ok = upload.result.status === 200 && created === SKILLS;
      report(
        `run ${i}${i === 1 ? ' (cold)' : ''}: bulk upload ${upload.ms.toFixed(0)} ms, server peak RSS ${upload.rssGrowthMb < 0 ? '' : '+'}${upload.rssGrowthMb.toFixed(1)} MB${upload.exactPeak ? '' : ' (sampled)'} (status ${upload.result.status}, created ${created}) | baseline yauzl inflate alone ${baseline.ms.toFixed(0)} ms (${(baseline.result / 2 ** 20).toFixed(1)} MB out) | ratio ${(upload.ms / baseline.ms).toFixed(1)}× | time < 2 s ${upload.ms < 2000 ? 'PASS' : 'MISS'}, RSS < 64 MB ${upload.rssGrowthMb < 64 ? 'PASS' : 'MISS'}${ok ? '' : ' !! upload failed'}`,
      );
    }
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
