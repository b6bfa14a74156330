/**
 * The ceiling for any Node HTTP upload on this machine: a bare `node:http` server that streams
 * each request body to a file in BARE_UPLOAD_DIR, nothing else. Sends `{ url }` once listening.
 */
import { createWriteStream } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';

let counter = 0;
const server = http.createServer(async (request, response) => {
  await pipeline(
    request,
    createWriteStream(path.join(process.env.BARE_UPLOAD_DIR!, `bare-${counter++}.bin`)),
  );
  response.end('ok');
});
server.listen(0, '127.0.0.1', () => {
  process.send?.({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
});
