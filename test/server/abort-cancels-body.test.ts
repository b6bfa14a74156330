/**
 * A response body that an abort cancels itself (src/abort-cancels-body.ts), so the connection
 * closes even once Node's fetch has lost the abort: undici passes it on through a WeakRef to the
 * Request object it made, which nothing holds after the Response has been returned for a request
 * with `redirect: 'error'` (the MCP transport's), so a garbage collection then left the
 * connection open until the server closed it.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { withBodyCancelledOnAbort } from '../../src/abort-cancels-body.js';

let url = '';
let openConnections = 0;
/** Headers and 100 of the 1,024 bytes announced, then nothing: the server never gives up. */
const stalling = createServer((req, res) => {
  openConnections++;
  req.socket.once('close', () => openConnections--);
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': '1024' });
  res.write(Buffer.alloc(100));
});
let collect: () => void;

beforeAll(async () => {
  await new Promise<void>((resolve) => stalling.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(stalling.address() as AddressInfo).port}/file`;
  v8.setFlagsFromString('--expose-gc');
  collect = vm.runInNewContext('gc') as () => void;
});
afterAll(async () => {
  stalling.closeAllConnections();
  await new Promise<void>((resolve) => stalling.close(() => resolve()));
});

describe('withBodyCancelledOnAbort', () => {
  it("closes the connection of a body cut off part way by the abort, after a collection lost Node's fetch its own", async () => {
    const controller = new AbortController();
    const response = withBodyCancelledOnAbort(
      await fetch(url, { signal: controller.signal, redirect: 'error' }),
      controller.signal,
    );
    const read = response.arrayBuffer().then(
      () => 'ended',
      (error: Error) => error.name,
    );
    await vi.waitFor(() => expect(openConnections).toBe(1));
    collect();
    controller.abort();
    await vi.waitFor(() => expect(openConnections).toBe(0), { timeout: 2_000 });
    expect(await read).toBe('AbortError');
  });

  it('passes the body through `through` and leaves a body without an abort as it is', async () => {
    const counted: number[] = [];
    const response = withBodyCancelledOnAbort(
      new Response('hello', { status: 201, statusText: 'Made', headers: { 'x-a': 'b' } }),
      new AbortController().signal,
      new TransformStream({
        transform(chunk, controller) {
          counted.push(chunk.byteLength);
          controller.enqueue(chunk);
        },
      }),
    );
    expect(response.status).toBe(201);
    expect(response.statusText).toBe('Made');
    expect(response.headers.get('x-a')).toBe('b');
    expect(await response.text()).toBe('hello');
    expect(counted).toEqual([5]);
  });
});
