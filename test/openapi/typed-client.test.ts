import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDemo } from '../../src/cli/demo.js';
import { createTestApp } from '../helpers/app.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const PROGRAM = path.join(here, 'typed-client', 'program.ts.txt');

let t: Awaited<ReturnType<typeof createTestApp>>;
let baseUrl: string;
let apiKey: string;
let dir: string;
let document: {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, unknown>>;
};

beforeAll(async () => {
  t = await createTestApp();
  apiKey = (await createDemo(t.env.database.db, new Date())).key!;
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  document = (await (await fetch(`${baseUrl}/v1/openapi.json`)).json()) as typeof document;
  // Inside node_modules, so the program resolves openapi-fetch from the project's packages.
  const cache = path.join(root, 'node_modules', '.cache');
  await mkdir(cache, { recursive: true });
  dir = await mkdtemp(path.join(cache, 'typed-client-'));
  // Binary schemas (storage bytes, uploaded files) become Blob, so a client can send a file.
  const ast = await openapiTS(document as Parameters<typeof openapiTS>[0], {
    transform: (schema) =>
      'format' in schema && schema.format === 'binary'
        ? ts.factory.createTypeReferenceNode(ts.factory.createIdentifier('Blob'))
        : undefined,
  });
  await writeFile(path.join(dir, 'api.d.ts'), astToString(ast));
  await copyFile(PROGRAM, path.join(dir, 'program.ts'));
  await writeFile(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        lib: ['ES2023', 'DOM', 'DOM.Iterable'],
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: [],
      },
      files: ['program.ts', 'api.d.ts'],
    }),
  );
  await writeFile(path.join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
}, 120_000);

afterAll(async () => {
  await t.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** `METHOD /path` of every operation in the served document. */
function documentedOperations(): string[] {
  return Object.entries(document.paths).flatMap(([route, item]) =>
    Object.keys(item).map((method) => `${method.toUpperCase()} ${route}`),
  );
}

describe('a client generated from the OpenAPI document (openapi-typescript + openapi-fetch)', () => {
  it('type-checks a program that calls every operation, with no casts', async () => {
    const program = await readFile(PROGRAM, 'utf8');
    expect(program).not.toMatch(/\bas\s+(unknown|any|never)\b|<any>|@ts-(ignore|expect-error)/);
    // Every operation of the document is called (a new route shows up here until it is).
    const called = new Set([...program.matchAll(/record\(\s*'([A-Z]+ [^']+)'/g)].map((match) => match[1]));
    expect([...called].sort()).toEqual(documentedOperations().sort());
    const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    const result = await promisify(execFile)(process.execPath, [tsc, '-p', dir], { cwd: dir }).then(
      () => ({ ok: true, output: '' }),
      (error: { stdout?: string; stderr?: string }) => ({
        ok: false,
        output: `${error.stdout}${error.stderr}`,
      }),
    );
    expect(result.output).toBe('');
    expect(result.ok).toBe(true);
  }, 120_000);

  it('reaches the right URLs: every call of the program succeeds against a live app', async () => {
    const { callEveryOperation } = (await import(pathToFileURL(path.join(dir, 'program.ts')).href)) as {
      callEveryOperation: (
        baseUrl: string,
        apiKey: string,
      ) => Promise<Array<{ operation: string; status: number }>>;
    };
    const calls = await callEveryOperation(baseUrl, apiKey);
    const failed = calls.filter((call) => call.status < 200 || call.status > 299);
    expect(failed).toEqual([]);
    expect(calls.find((call) => call.operation === 'PUT /storage/objects/{path}')?.status).toBe(200);
    expect(calls.find((call) => call.operation === 'GET /v1/chat/{chatId}/stream')?.status).toBe(204);
  }, 120_000);

  it('pre-fills a chat body in the document that succeeds against the demo workspace', async () => {
    const operation = document.paths['/v1/chat']!.post as {
      requestBody: { content: { 'application/json': { example: unknown } } };
    };
    const response = await fetch(`${baseUrl}/v1/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-service-api-key': apiKey },
      body: JSON.stringify(operation.requestBody.content['application/json'].example),
    });
    expect(response.status).toBe(200);
  });
});
