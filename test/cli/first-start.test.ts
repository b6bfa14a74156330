import { mkdtempSync, rmSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { runAtriumCli, type ServeProcess, startServeProcess } from '../helpers/serve-processes.js';

// `npm start` on the embedded database (SQLite in ATRIUM_DATA_DIR), as a newcomer runs it: the
// demo is made for that case only, so this file runs on SQLite whatever TEST_DATABASE_URL says.
const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-first-start-'));
const env = {
  ATRIUM_DATA_DIR: dataDir,
  ATRIUM_SIGNING_SECRET: 'first-start-signing-secret-of-32-bytes',
  LOG_LEVEL: 'warn',
};
const running: ServeProcess[] = [];
const dataDirs = [dataDir];
afterAll(async () => {
  await Promise.all(running.map((server) => server.stop('SIGKILL')));
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});

async function serve(extraEnv: Record<string, string> = {}): Promise<ServeProcess> {
  const server = await startServeProcess({ ...env, ...extraEnv });
  running.push(server);
  return server;
}

const agents = (server: ServeProcess, key: string) =>
  fetch(`${server.url}/v1/workspace/wsp_demo/agents`, { headers: { 'x-service-api-key': key } });

describe('npm start on the embedded database (sqlite)', () => {
  it('prints a working key on the first start, and on a later one the command that makes another', async () => {
    const first = await serve();
    await vi.waitFor(() => expect(first.output()).toContain('API key (shown once, keep it):'), {
      timeout: 10_000,
    });
    const firstKey = /API key \(shown once, keep it\): (atr_ws_\S+)/.exec(first.output())![1]!;
    expect((await agents(first, firstKey)).status).toBe(200);
    await first.stop();

    const second = await serve();
    // With the data dir the server was given: pasted elsewhere, the command finds the same data.
    const command = `ATRIUM_DATA_DIR=${dataDir} ./bin/atrium keys create --workspace wsp_demo --user usr_demo_owner`;
    await vi.waitFor(() => expect(second.output()).toContain(command), { timeout: 10_000 });
    expect(second.output()).not.toContain('API key (shown once');
    expect(second.output()).not.toContain(firstKey);

    // The printed command works as printed (run from source, as bin/atrium runs the build).
    const [assignment, , ...args] = command.split(' ');
    const { stdout } = await runAtriumCli(
      {
        ATRIUM_SIGNING_SECRET: env.ATRIUM_SIGNING_SECRET,
        ATRIUM_DATA_DIR: assignment!.slice('ATRIUM_DATA_DIR='.length),
      },
      args,
    );
    const newKey = /(atr_ws_\S+)/.exec(stdout)![1]!;
    expect(newKey).not.toBe(firstKey);
    expect((await agents(second, newKey)).status).toBe(200);
    // Printed at every start, so it works every time (with `--name demo` the second run was
    // refused: the name was taken).
    const again = await runAtriumCli(
      { ATRIUM_SIGNING_SECRET: env.ATRIUM_SIGNING_SECRET, ATRIUM_DATA_DIR: dataDir },
      args,
    );
    const thirdKey = /(atr_ws_\S+)/.exec(again.stdout)![1]!;
    expect(thirdKey).not.toBe(newKey);
    expect((await agents(second, thirdKey)).status).toBe(200);
  }, 360_000);

  it('shows the key on the start that serves it, not on an earlier one that found its port taken', async () => {
    const freshDir = mkdtempSync(path.join(tmpdir(), 'atrium-first-start-'));
    dataDirs.push(freshDir);
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as AddressInfo;
    let refused: { code?: number; stdout?: string; stderr?: string };
    try {
      refused = await runAtriumCli(
        { ...env, ATRIUM_DATA_DIR: freshDir, PORT: String(port), HOST: '127.0.0.1' },
        ['serve'],
      ).then(
        () => ({ code: 0 }),
        (error: { code?: number; stdout?: string; stderr?: string }) => error,
      );
    } finally {
      await new Promise<void>((resolve) => holder.close(() => resolve()));
    }
    expect(refused.code).toBe(1);
    const refusedOutput = `${refused.stdout}${refused.stderr}`;
    // It made the demo and its key, then could not serve: the key was never seen, and the next
    // start said it "was shown once, at the first start".
    expect(refusedOutput).not.toContain('atr_ws_');
    // The port after the one taken (it said PORT=3001 whatever the port was).
    expect(refusedOutput).toContain(`start on another port (PORT=${port + 1} npm start`);

    const server = await serve({ ATRIUM_DATA_DIR: freshDir });
    await vi.waitFor(() => expect(server.output()).toContain('API key (shown once, keep it):'), {
      timeout: 10_000,
    });
    expect(server.output()).not.toContain('its key was shown once');
    const key = /API key \(shown once, keep it\): (atr_ws_\S+)/.exec(server.output())![1]!;
    expect((await agents(server, key)).status).toBe(200);
  }, 360_000);
});
