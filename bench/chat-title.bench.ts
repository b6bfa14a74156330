/**
 * A chat's title is made from its first message, which may be as long as the chat body limit
 * (16 MiB). Making it must cost next to nothing beside what such a body costs anyway: reports
 * the title's time for three 15 MB first messages against the request that carries the same
 * body through the app (the baseline, measured here in the same run: `POST /v1/chat`, not
 * streamed, SQLite, the fake upstream's short reply; reading, checking and storing the body).
 * Target: the title ≤ 5% of that request. JSON.parse of the body alone was the baseline before:
 * it took 13–40 ms on one host and 630–1,550 ms on another for the same bytes, too unsteady to
 * measure against.
 */
import { rmSync } from 'node:fs';
import { buildApp } from '../src/app.js';
import { migrateToLatest, openDatabase } from '../src/db/database.js';
import { chatTitle } from '../src/services/chat-messages.js';
import { applySetup } from '../src/setup/apply.js';
import { startFakeUpstream } from '../test/helpers/fake-upstream.js';
import type { Report } from './run.js';
import { benchDataDir, benchSetup } from './support/bench-setup.js';

const KEY = 'atr_ws_bench_title_key_000000000000000000000';
const MESSAGES: Array<[string, string]> = [
  ['3 million words', 'word '.repeat(3_000_000)],
  ['one 15 MB word', 'x'.repeat(15_000_000)],
  ['5 million blank lines, then text', `${' \n'.repeat(5_000_000)}late start`],
];
const ROUNDS = 5;
const REQUEST_ROUNDS = 3;

async function medianMs(rounds: number, work: () => unknown): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const started = performance.now();
    await work();
    times.push(performance.now() - started);
  }
  return times.sort((a, b) => a - b)[Math.floor(rounds / 2)]!;
}

export async function run(report: Report): Promise<void> {
  const upstream = await startFakeUpstream();
  const { dataDir, config } = benchDataDir('title');
  const database = await openDatabase(config.database);
  await migrateToLatest(database.db);
  const agents = [{ id: 'agt_bench', title: 'Bench', instructions: 'You help.' }];
  await applySetup(database.db, benchSetup({ baseURL: upstream.baseURL, key: KEY, agents }), {
    now: new Date(),
  });
  const app = await buildApp({ config, db: database.db }, { logger: false });
  try {
    for (const [name, text] of MESSAGES) {
      const messages = [{ role: 'user' as const, parts: [{ type: 'text' as const, text }] }];
      const payload = JSON.stringify({ agentId: 'agt_bench', messages });
      const request = await medianMs(REQUEST_ROUNDS, async () => {
        const res = await app.inject({
          method: 'POST',
          url: '/v1/chat',
          headers: { 'content-type': 'application/json', 'x-service-api-key': KEY },
          payload,
        });
        if (res.statusCode !== 200) throw new Error(`answered ${res.statusCode}: ${res.body.slice(0, 300)}`);
      });
      const title = await medianMs(ROUNDS, () => chatTitle(messages));
      const ratio = (title / request) * 100;
      report(
        `chat title of a ${(payload.length / 1e6).toFixed(1)} MB first message (${name}): ${title.toFixed(2)} ms | POST /v1/chat with that body ${request.toFixed(0)} ms | ${ratio.toFixed(1)}% (target ≤ 5%) ${ratio <= 5 ? 'PASS' : 'MISS'}`,
      );
    }
  } finally {
    await app.close();
    await database.close();
    await upstream.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
