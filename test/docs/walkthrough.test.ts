import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_SETUP } from '../../src/cli/demo.js';
import { engineName } from '../helpers/app.js';
import { type ServeCluster, startServeCluster } from '../helpers/serve-processes.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SCRIPT = path.join(ROOT, 'examples/walkthrough.sh');
const DEMO_KEY = 'atr_ws_walkthrough_demo_owner_000000000000000';

/**
 * The demo workspace `npm start` creates, with a key known in advance (the first start prints a
 * random one): the script runs as a newcomer would run it after `npm start`.
 */
function demoSetupWithKey(): string {
  const setup = structuredClone(DEMO_SETUP);
  setup.organizations![0]!.workspaces![0]!.apiKeys![0]!.key = DEMO_KEY;
  return JSON.stringify(setup);
}

/**
 * The command lines of the README's walk-through (```sh blocks from "Walk-through with curl" to
 * the next top-level section; example output and remarks start with `#`). ```shell blocks are
 * examples the script does not run (setting up the shell, a browser page).
 */
function readmeWalkthroughLines(): string[] {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('## Walk-through with curl');
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end);
  const blocks = [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
  return blocks
    .flatMap((block) => block.split('\n'))
    .filter((line) => line.trim() !== '' && !line.trimStart().startsWith('#'))
    .map((line) => line.replace(/\s{2,}# .*$/, ''));
}

/** The script's lines as the README shows them: without the status check before `curl`. */
function scriptLines(): string[] {
  return readFileSync(SCRIPT, 'utf8')
    .split('\n')
    .map((line) => line.replace(/\b(?:ok|status \d{3}) (?=curl )/g, ''));
}

let cluster: ServeCluster;
beforeAll(async () => {
  cluster = await startServeCluster({ processes: 1, setup: demoSetupWithKey() });
}, 150_000);
afterAll(() => cluster?.close());

describe(`the README walk-through (${engineName})`, () => {
  it('runs every step of examples/walkthrough.sh against a real atrium serve', async () => {
    const { stdout, stderr } = await promisify(execFile)('bash', [SCRIPT], {
      env: { ...process.env, KEY: DEMO_KEY, A: cluster.servers[0]!.url },
      maxBuffer: 16 * 1024 * 1024,
    });
    expect(stderr).toBe('');
    expect(stdout).toContain('== walkthrough: every step answered as expected');
  }, 300_000);

  it('shows in the README the commands the script runs, in the same order', () => {
    const readme = readmeWalkthroughLines();
    expect(readme.length).toBeGreaterThan(40);
    const script = scriptLines();
    let at = 0;
    for (const line of readme) {
      const found = script.indexOf(line, at);
      expect(found, `README line not in examples/walkthrough.sh (in order):\n${line}`).toBeGreaterThanOrEqual(
        0,
      );
      at = found + 1;
    }
  });
});
