import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../../src/app.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { RawClient, rawExchange } from '../helpers/raw-http.js';

/** Every log line of the app, parsed, to check what a client's mistakes are logged as. */
const logLines: Array<Record<string, unknown>> = [];
const logStream = new Writable({
  write(chunk: Buffer, _encoding, callback) {
    for (const line of chunk.toString('utf8').split('\n')) if (line) logLines.push(JSON.parse(line));
    callback();
  },
});

let env: TestEnv;
let app: Awaited<ReturnType<typeof buildApp>>;
let port: number;
let origin: string;
beforeAll(async () => {
  env = await createTestEnv();
  await applyFixture(env, TENANCY_SETUP);
  app = await buildApp(
    { config: env.config, db: env.database.db },
    { logger: { level: 'info', stream: logStream } },
  );
  origin = await app.listen({ port: 0, host: '127.0.0.1' });
  port = Number(new URL(origin).port);
});
afterAll(async () => {
  await app?.close();
  await env?.close();
});

const execFileAsync = promisify(execFile);

const errorBody = (code: string) => ({ code, message: expect.any(String), details: expect.any(Object) });

describe(`HTTP protocol errors in the error body (${engineName})`, () => {
  it('answers headers over 16 KB with 431 headers_too_large', async () => {
    const response = await rawExchange(
      port,
      `GET /healthz HTTP/1.1\r\nHost: x\r\nx-big: ${'a'.repeat(17 * 1024)}\r\n\r\n`,
    );
    expect(response.status).toBe(431);
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    expect(JSON.parse(response.body)).toMatchObject(errorBody('headers_too_large'));
  });

  it('answers Content-Length together with Transfer-Encoding with 400 bad_request', async () => {
    const response = await rawExchange(
      port,
      'POST /v1/projects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
    );
    expect(response.status).toBe(400);
    expect(JSON.parse(response.body)).toMatchObject(errorBody('bad_request'));
  });

  it('answers control bytes or raw non-ASCII bytes in the path with 400 bad_request', async () => {
    for (const bad of [Buffer.from([0x01]), Buffer.from([0xff, 0xfe]), Buffer.from('%E0%A4%A')]) {
      const request = Buffer.concat([
        Buffer.from('GET /v1/agents'),
        bad,
        Buffer.from(' HTTP/1.1\r\nHost: x\r\n\r\n'),
      ]);
      const response = await rawExchange(port, request);
      expect(response.status, bad.toString('hex')).toBe(400);
      expect(JSON.parse(response.body)).toMatchObject(errorBody('bad_request'));
    }
  });

  it('answers an HTTP/1.1 request without Host with 400 bad_request, and serves HTTP/1.0 without one', async () => {
    const missing = await rawExchange(port, 'GET /healthz HTTP/1.1\r\n\r\n');
    expect(missing.status).toBe(400);
    expect(JSON.parse(missing.body)).toMatchObject({
      ...errorBody('bad_request'),
      message: expect.stringContaining('Host'),
    });
    const old = await rawExchange(port, 'GET /healthz HTTP/1.0\r\n\r\n');
    expect(old.status).toBe(200);
  });

  it('ignores an Expect other than 100-continue (RFC 9110 allows it) instead of Node’s bare 417', async () => {
    const body = '{"name":"Expect"}';
    const created = await rawExchange(
      port,
      `POST /v1/projects HTTP/1.1\r\nHost: x\r\nx-service-api-key: ${KEYS.mainOwner}\r\nContent-Type: application/json\r\nExpect: something-else\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    expect(created.status).toBe(201);
    expect(JSON.parse(created.body)).toMatchObject({ data: { project: { name: 'Expect' } } });
    // Its errors are the API's error body, as any other request's.
    const refused = await rawExchange(port, 'GET /v1/projects HTTP/1.1\r\nHost: x\r\nExpect: foo\r\n\r\n');
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.body)).toMatchObject(errorBody('not_authenticated'));
  });

  it('refuses a JSON body that is not valid UTF-8 with 400 instead of storing U+FFFD', async () => {
    const body = Buffer.concat([Buffer.from('{"name":"caf'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    const res = await fetch(`${origin}/v1/projects`, {
      method: 'POST',
      headers: { 'x-service-api-key': KEYS.mainOwner, 'content-type': 'application/json' },
      body,
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      ...errorBody('bad_request'),
      message: expect.stringMatching(/UTF-8/),
    });
    const valid = await fetch(`${origin}/v1/projects`, {
      method: 'POST',
      headers: { 'x-service-api-key': KEYS.mainOwner, 'content-type': 'application/json' },
      body: Buffer.from('{"name":"café ☕"}'),
    });
    expect(valid.status).toBe(201);
    expect(((await valid.json()) as { data: { project: { name: string } } }).data.project.name).toBe(
      'café ☕',
    );
  });

  it('answers a JSON body declared in another charset than UTF-8 with 415 naming it, and takes charset=utf-8', async () => {
    const post = (contentType: string, body: Uint8Array<ArrayBuffer>) =>
      fetch(`${origin}/v1/projects`, {
        method: 'POST',
        headers: { 'x-service-api-key': KEYS.mainOwner, 'content-type': contentType },
        body,
      });
    // A real UTF-16 body (with its byte order mark), as a Windows client may send one.
    const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('{"name":"Plans"}', 'utf16le')]);
    for (const contentType of ['application/json; charset=utf-16', 'application/json;charset="UTF-16LE"']) {
      const res = await post(contentType, utf16);
      expect(res.status, contentType).toBe(415);
      expect(await res.json()).toEqual({
        ...errorBody('unsupported_media_type'),
        message: expect.stringMatching(/^The JSON body must be UTF-8 \(RFC 8259\), not charset=utf-16/i),
        details: { accepted: ['application/json; charset=utf-8'] },
      });
    }
    const latin1 = await post(
      'application/json; charset=iso-8859-1',
      Buffer.from('{"name":"caf\xe9"}', 'latin1'),
    );
    expect(latin1.status).toBe(415);
    // The name is the client's text: a long one is cut, not answered (and logged) whole.
    const long = await post(`application/json; charset=${'x'.repeat(1000)}`, Buffer.from('{}'));
    expect(long.status).toBe(415);
    expect(((await long.json()) as { message: string }).message).toBe(
      `The JSON body must be UTF-8 (RFC 8259), not charset=${'x'.repeat(39)}…`,
    );
    // US-ASCII is UTF-8's first 128 characters; a `charset=` inside another parameter's quoted
    // value is no charset; a parameter list that does not parse is read as none (as before).
    for (const contentType of [
      'application/json; charset=utf-8',
      'application/json; charset="UTF8"',
      'application/json; charset=us-ascii',
      'application/json; foo="x;charset=utf-16"',
      'application/json; charset="utf-16',
    ]) {
      const ok = await post(contentType, Buffer.from('{"name":"café"}'));
      expect(ok.status, contentType).toBe(201);
    }
  });

  it('answers a body far over its limit with 413 to a client that writes it whole before reading, not a reset', async () => {
    // fetch in a process of its own, as a real client: in this one, the server's reads and the
    // client's writes take turns on one event loop and the reset never shows. 24 MiB is more than
    // the kernel's socket buffers take in while the answer is on its way, and past the 1 MiB JSON
    // limit, the 16 MiB chat limit, and OpenAI's route (its own error shape); the fourth is chunked,
    // so the server learns the size only while reading; the last goes to no route at all (404).
    const client = `
      const bytes = 24 * 1024 * 1024;
      const chunked = () => {
        let sent = 0;
        return new ReadableStream({
          pull(c) { if (sent >= bytes) return c.close(); sent += 65536; c.enqueue(new Uint8Array(65536).fill(97)); },
        });
      };
      const results = [];
      for (const [route, body] of [
        ['/v1/projects', new Uint8Array(bytes).fill(97)],
        ['/v1/chat', new Uint8Array(bytes).fill(97)],
        ['/v1/openai/chat/completions', new Uint8Array(bytes).fill(97)],
        ['/v1/projects', chunked()],
        ['/nowhere', new Uint8Array(bytes).fill(97)],
      ]) {
        try {
          const res = await fetch(process.env.ORIGIN + route, {
            method: 'POST', body, duplex: 'half',
            headers: { 'x-service-api-key': process.env.KEY, 'content-type': 'application/json' },
          });
          const json = await res.json();
          results.push(route + ' ' + res.status + ' ' + (json.code ?? json.error.code));
        } catch (error) {
          results.push(route + ' ' + (error.cause?.code ?? error.message));
        }
      }
      console.log(JSON.stringify(results));`;
    const { stdout } = await execFileAsync(process.execPath, ['--input-type=module', '-e', client], {
      env: { ...process.env, ORIGIN: origin, KEY: KEYS.mainOwner },
    });
    expect(JSON.parse(stdout)).toEqual([
      '/v1/projects 413 payload_too_large',
      '/v1/chat 413 payload_too_large',
      '/v1/openai/chat/completions 413 payload_too_large',
      '/v1/projects 413 payload_too_large',
      '/nowhere 404 not_found',
    ]);
  });

  it('echoes a well-formed x-request-id and replaces an over-long or unsafe one', async () => {
    const ok = await fetch(`${origin}/healthz`, { headers: { 'x-request-id': 'trace-0123:abc/def' } });
    expect(ok.headers.get('x-request-id')).toBe('trace-0123:abc/def');
    for (const bad of ['a'.repeat(129), 'has space', 'quote"', '<script>', 'a, b']) {
      const res = await fetch(`${origin}/healthz`, { headers: { 'x-request-id': bad } });
      expect(res.headers.get('x-request-id')).toMatch(/^req_/);
    }
    const longest = 'b'.repeat(128);
    const edge = await fetch(`${origin}/healthz`, { headers: { 'x-request-id': longest } });
    expect(edge.headers.get('x-request-id')).toBe(longest);
  });

  it('logs a client that cuts off its PUT at info, without a stack', async () => {
    const res = await fetch(`${origin}/v1/projects/prj_docs/files/upload`, {
      method: 'POST',
      headers: { 'x-service-api-key': KEYS.mainOwner, 'content-type': 'application/json' },
      body: JSON.stringify({
        filename: 'cut.bin',
        contentType: 'application/octet-stream',
        sizeBytes: 100_000,
      }),
    });
    const url = new URL(((await res.json()) as { data: { uploadUrl: string } }).data.uploadUrl);
    const client = new RawClient(port);
    client.send(
      `PUT ${url.pathname}${url.search} HTTP/1.1\r\nHost: x\r\nx-request-id: cut-off-put\r\nContent-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n`,
    );
    client.send(Buffer.alloc(30_000, 'c'));
    // The server is writing the body (its temp file exists) before the client cuts off.
    const tmp = path.join((env.config.storage as { root: string }).root, 'tmp');
    await vi.waitFor(
      () => expect(existsSync(tmp) && readdirSync(tmp).some((name) => name.endsWith('.data'))).toBe(true),
      { timeout: 10_000, interval: 20 },
    );
    client.close();
    await vi.waitFor(
      () =>
        expect(logLines.some((line) => line.reqId === 'cut-off-put' && line.code === 'bad_request')).toBe(
          true,
        ),
      { timeout: 10_000, interval: 20 },
    );
    const lines = logLines.filter((line) => line.reqId === 'cut-off-put');
    expect(lines.every((line) => (line.level as number) <= 40)).toBe(true);
    expect(JSON.stringify(lines)).not.toMatch(/stack/);
  });

  it('logs Node-level client errors without a stack and below error level', () => {
    const clientErrors = logLines.filter((line) => typeof line.reason === 'string');
    expect(clientErrors.length).toBeGreaterThan(0);
    expect(clientErrors.every((line) => (line.level as number) <= 40)).toBe(true);
    expect(JSON.stringify(clientErrors)).not.toMatch(/stack/);
  });
});
