/**
 * The input guard (plugins/input-guard.ts) refuses strings no database stores and bodies nested
 * too deep. Walking a parsed body of a million keys took as long as parsing it; a large body's
 * text now vouches for it (json-containers.ts, isPlainJsonWithin) and the walk is spared. Reports
 * the scan of the text against JSON.parse of the same text (the baseline, in the same run), for
 * bodies of the largest shapes the chat body limit (16 MiB) lets through. Target: ≤ 10%.
 * Before parsing, every large body is also counted against the limits of limits.ts (objects and
 * arrays, different key names: jsonTextPastLimits), which refuses the first body unparsed; that
 * scan's time is reported beside it, against the same parse, with no target of its own.
 */
import { isPlainJsonWithin, JSON_TEXT_LIMITS, jsonTextPastLimits } from '../src/http/json-containers.js';
import { findUnstorableInput, MAX_INPUT_DEPTH } from '../src/http/plugins/input-guard.js';
import type { Report } from './run.js';

const ROUNDS = 7;

/** The median of ROUNDS, after one unmeasured round (the scan is compiled on its first bodies). */
function medianMs(work: () => unknown): number {
  work();
  const times: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const started = performance.now();
    work();
    times.push(performance.now() - started);
  }
  return times.sort((a, b) => a - b)[Math.floor(ROUNDS / 2)]!;
}

const keys = (count: number) => Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${i}`, i]));

const BODIES: Array<[string, unknown]> = [
  ['a million keys in one object', { agentId: 'agt_bench', variables: keys(1_000_000) }],
  [
    '1,000 objects of 1,000 keys',
    {
      agentId: 'agt_bench',
      variables: Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`o${i}`, keys(1000)])),
    },
  ],
  [
    'one 15 MB text',
    {
      agentId: 'agt_bench',
      messages: [{ role: 'user', parts: [{ type: 'text', text: 'word '.repeat(3_000_000) }] }],
    },
  ],
];

export async function run(report: Report): Promise<void> {
  for (const [name, value] of BODIES) {
    const bytes = Buffer.from(JSON.stringify(value));
    const text = bytes.toString('utf8');
    const parse = medianMs(() => JSON.parse(text));
    const parsed: unknown = JSON.parse(text);
    const walk = medianMs(() => findUnstorableInput(parsed, 'body'));
    const scan = medianMs(() => isPlainJsonWithin(bytes, MAX_INPUT_DEPTH));
    const limitsScan = medianMs(() => jsonTextPastLimits(bytes, JSON_TEXT_LIMITS));
    const passed = jsonTextPastLimits(bytes, JSON_TEXT_LIMITS);
    const ratio = (scan / parse) * 100;
    report(
      `input guard on a ${(bytes.length / 1e6).toFixed(1)} MB body (${name}): text scan ${scan.toFixed(2)} ms (plain: ${isPlainJsonWithin(bytes, MAX_INPUT_DEPTH)}; the walk it spares ${walk.toFixed(0)} ms) | JSON.parse of the body ${parse.toFixed(0)} ms | ${ratio.toFixed(1)}% (target ≤ 10%) ${ratio <= 10 ? 'PASS' : 'MISS'}`,
    );
    report(
      `  the limits scan before parsing: ${limitsScan.toFixed(2)} ms = ${((limitsScan / parse) * 100).toFixed(1)}% of JSON.parse (${passed ? `refuses the body unparsed: ${passed}` : 'lets it through'})`,
    );
  }
}
