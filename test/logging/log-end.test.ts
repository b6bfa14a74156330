import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { endLogWrites } from '../../src/logging/log-end.js';

const dir = mkdtempSync(path.join(tmpdir(), 'atrium-log-end-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('endLogWrites', () => {
  it('resolves once every line logged before it is written (pino’s asynchronous destination)', async () => {
    const file = path.join(dir, 'out.log');
    const destination = pino.destination({ dest: file, sync: false });
    await new Promise((resolve) => destination.once('ready', resolve));
    const log = pino(destination);
    for (let n = 0; n < 2_000; n++) log.info({ n, padding: 'x'.repeat(500) }, 'line');
    log.info('stopped');
    await endLogWrites(log);
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(2_001);
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ msg: 'stopped' });
  });

  it('drops a line logged after the end instead of throwing (a request or a background task finishing late)', async () => {
    const file = path.join(dir, 'late.log');
    const destination = pino.destination({ dest: file, sync: false });
    await new Promise((resolve) => destination.once('ready', resolve));
    const log = pino(destination);
    const requestLog = log.child({ reqId: 'req_late' });
    log.info('stopped');
    await endLogWrites(log);
    // SonicBoom threw "SonicBoom destroyed" here: in a response's hook, a crash on the way out.
    expect(() => requestLog.info('request completed')).not.toThrow();
    expect(() => log.warn('could not sweep leftovers')).not.toThrow();
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    expect(lines.map((line) => JSON.parse(line).msg)).toEqual(['stopped']);
  });

  it('gives up after its bound when the destination never finishes writing (stdout nobody reads)', async () => {
    const stuck = new Writable({ write: () => undefined }); // never calls back: a write that never ends
    const log = pino(stuck);
    log.info('waiting forever');
    await expect(endLogWrites(log, 50)).resolves.toBeUndefined();
  });

  it('leaves process.stdout alone', async () => {
    const log = pino(process.stdout);
    await endLogWrites(log);
    expect(process.stdout.writableEnded).toBe(false);
  });
});
