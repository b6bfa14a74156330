/**
 * A chat's title is made from its first message, which may be as long as the chat body limit
 * (16 MiB). Making it must cost next to nothing beside what such a body costs anyway: reports
 * the title's time for three 15 MB first messages against JSON.parse of the same request body
 * (the baseline, measured here in the same run). Target: the title ≤ 5% of the parse.
 */
import { chatTitle } from '../src/services/chat-messages.js';
import type { Report } from './run.js';

const MESSAGES: Array<[string, string]> = [
  ['3 million words', 'word '.repeat(3_000_000)],
  ['one 15 MB word', 'x'.repeat(15_000_000)],
  ['5 million blank lines, then text', `${' \n'.repeat(5_000_000)}late start`],
];
const ROUNDS = 5;

function medianMs(work: () => unknown): number {
  const times: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const started = performance.now();
    work();
    times.push(performance.now() - started);
  }
  return times.sort((a, b) => a - b)[Math.floor(ROUNDS / 2)]!;
}

export async function run(report: Report): Promise<void> {
  for (const [name, text] of MESSAGES) {
    const body = JSON.stringify({
      agentId: 'agt_bench',
      messages: [{ role: 'user', parts: [{ type: 'text', text }] }],
    });
    const parse = medianMs(() => JSON.parse(body));
    const messages = [{ role: 'user' as const, parts: [{ type: 'text' as const, text }] }];
    const title = medianMs(() => chatTitle(messages));
    const ratio = (title / parse) * 100;
    report(
      `chat title of a ${(body.length / 1e6).toFixed(1)} MB first message (${name}): ${title.toFixed(2)} ms | JSON.parse of the body ${parse.toFixed(2)} ms | ${ratio.toFixed(1)}% (target ≤ 5%) ${ratio <= 5 ? 'PASS' : 'MISS'}`,
    );
  }
}
