/**
 * Issue 16: what keeping PostgreSQL's caches exact costs a write (src/db/pg-change-signals.ts).
 * One update of a cached table (`projects`), timed in interleaved rounds: through a plain pg
 * client (the baseline: no signals), through Atrium's database with no other process holding a
 * lease (one query for the leases), and with one and with three other processes holding leases
 * (a barrier notified, and each confirming). Runs only with BENCH_DATABASE_URL.
 */
import pg from 'pg';
import { ExactCache } from '../src/db/exact-cache.js';
import { type DatabaseHandle, migrateToLatest, openDatabase } from '../src/db/database.js';
import { interleavedRounds, percentile } from './support/bench-setup.js';
import type { Report } from './run.js';

const CALLS = Number(process.env.BENCH_WRITES ?? 1_000);
const UPDATE = `update projects set description = 'x' where id = 'prj_none'`;

export async function run(report: Report) {
  const url = process.env.BENCH_DATABASE_URL;
  if (!url) {
    report('skipped (set BENCH_DATABASE_URL)');
    return;
  }
  const schema = `bench_signals_${process.pid}`;
  const writer = await openDatabase({ kind: 'postgres', url, schema });
  const plain = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
  const others: DatabaseHandle[] = [];
  try {
    await migrateToLatest(writer.db, schema);
    await plain.connect();
    /** Another process answering from memory: its cache has asked for a version (a lease). */
    const addLeasedProcess = async () => {
      const other = await openDatabase({ kind: 'postgres', url, schema });
      others.push(other);
      const cache = ExactCache.for(other.db, ['projects'], { entries: 1 })!;
      while ((await cache.readVersion()) < 0) await new Promise((resolve) => setTimeout(resolve, 20));
    };
    const plainWrite = async () => void (await plain.query(UPDATE));
    const atriumWrite = async () =>
      void (await writer.db
        .updateTable('projects')
        .set({ description: 'x' })
        .where('id', '=', 'prj_none')
        .execute());
    const line = (label: string, samples: number[], base: number[]) =>
      report(
        `${label}: p50 ${percentile(samples, 50).toFixed(3)} ms, p99 ${percentile(samples, 99).toFixed(3)} ms; adds p50 ${(percentile(samples, 50) - percentile(base, 50)).toFixed(3)} ms to the plain update (p50 ${percentile(base, 50).toFixed(3)} ms)`,
      );
    report(`one update of a cached table, ${CALLS} per measurement, interleaved rounds`);
    let [base, write] = await interleavedRounds(CALLS, [plainWrite, atriumWrite]);
    line('no other process holding a lease', write!, base!);
    await addLeasedProcess();
    [base, write] = await interleavedRounds(CALLS, [plainWrite, atriumWrite]);
    line('one other process holding a lease (a barrier and its confirmation)', write!, base!);
    await addLeasedProcess();
    await addLeasedProcess();
    [base, write] = await interleavedRounds(CALLS, [plainWrite, atriumWrite]);
    line('three other processes holding leases', write!, base!);
  } finally {
    for (const other of others) await other.close();
    await plain.end().catch(() => {});
    await writer.db.schema.dropSchema(schema).ifExists().cascade().execute();
    await writer.close();
  }
}
