import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS } from '../../src/errors.js';
import { createTestApp } from '../helpers/app.js';

const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src');

interface ErrorResponse {
  content?: Record<
    string,
    { schema?: { $ref?: string }; examples?: Record<string, { value: { code: string } }> }
  >;
}
interface Document {
  paths: Record<string, Record<string, { responses: Record<string, ErrorResponse> }>>;
  components: {
    schemas: {
      Error: { properties: { code: { enum: string[] }; details: { properties: Record<string, unknown> } } };
    };
  };
}

let t: Awaited<ReturnType<typeof createTestApp>>;
let doc: Document;
beforeAll(async () => {
  t = await createTestApp();
  doc = (await t.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
});
afterAll(() => t.close());

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

/** Codes written in the source where an error is made: `new ApiError('code'` and the code maps. */
async function codesInSource(): Promise<Set<string>> {
  const codes = new Set<string>();
  for (const file of await sourceFiles(src)) {
    const text = await readFile(file, 'utf8');
    for (const match of text.matchAll(/new ApiError\(\s*'([a-z_]+)'/g)) codes.add(match[1]!);
    // The maps from Fastify's and Node's failures to our codes (error-handler.ts).
    for (const map of text.matchAll(/Record<(?:string|number), ErrorCode> = \{([^}]*)\}/g)) {
      for (const match of map[1]!.matchAll(/:\s*'([a-z_]+)'/g)) codes.add(match[1]!);
    }
  }
  return codes;
}

describe('error codes in the OpenAPI document', () => {
  it('lists every code the service answers with in the Error enum', async () => {
    const documented = doc.components.schemas.Error.properties.code.enum;
    expect([...documented].sort()).toEqual(Object.keys(ERROR_STATUS).sort());
    const thrown = await codesInSource();
    expect(thrown.size).toBeGreaterThan(10);
    expect([...thrown].filter((code) => !documented.includes(code))).toEqual([]);
  });

  it('shows each code as an example of its own status, and only there', () => {
    const examples = new Map<string, Set<string>>();
    for (const item of Object.values(doc.paths)) {
      for (const operation of Object.values(item)) {
        for (const [status, response] of Object.entries(operation.responses)) {
          const json = response.content?.['application/json'];
          if (json?.schema?.$ref !== '#/components/schemas/Error') continue;
          expect(json.examples, `error response ${status} has examples`).toBeDefined();
          for (const example of Object.values(json.examples ?? {})) {
            const code = example.value.code as keyof typeof ERROR_STATUS;
            expect(String(ERROR_STATUS[code]), `${code} shown under ${status}`).toBe(status);
            examples.set(status, (examples.get(status) ?? new Set()).add(code));
          }
        }
      }
    }
    const shown = new Set([...examples.values()].flatMap((codes) => [...codes]));
    // Every code a route can answer with has an example (internal_error and the rest included).
    expect(Object.keys(ERROR_STATUS).filter((code) => !shown.has(code))).toEqual([]);
  });

  // A generated client types only the declared fields of `details` (the rest is `unknown`).
  it('declares every details field the examples show and the errors table of docs/api.md names', async () => {
    const declared = Object.keys(doc.components.schemas.Error.properties.details.properties);
    const shown = new Set<string>();
    for (const item of Object.values(doc.paths)) {
      for (const operation of Object.values(item)) {
        for (const response of Object.values(operation.responses)) {
          for (const example of Object.values(response.content?.['application/json']?.examples ?? {})) {
            const { details } = example.value as unknown as { details: Record<string, unknown> };
            for (const field of Object.keys(details)) shown.add(`example: ${field}`);
          }
        }
      }
    }
    const api = await readFile(path.join(src, '../docs/api.md'), 'utf8');
    const table = api.slice(api.indexOf('| status | code |'), api.indexOf('## Service'));
    for (const row of table
      .split('\n')
      .filter((line) => /^\| [0-9]{3} /.test(line) && !line.startsWith('| 400'))) {
      const detailsColumn = row.split('|').at(-2)!;
      for (const [, field] of detailsColumn.matchAll(/`([a-z][A-Za-z]*)(?::[^`]*)?`/g)) {
        // `field` (`title`, `name`): the values of `field`, not fields.
        if (!['title', 'name'].includes(field!)) shown.add(`docs/api.md: ${field}`);
      }
    }
    expect(shown.size).toBeGreaterThan(15);
    expect([...shown].filter((entry) => !declared.includes(entry.split(': ')[1]!))).toEqual([]);
  });

  it('lists 503 on every route that takes a key: storage or the database may not answer', () => {
    const missing: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        const secured = (operation as { security?: unknown[] }).security;
        if (!secured || secured.length === 0) continue;
        if (!operation.responses['503']) missing.push(`${method.toUpperCase()} ${path}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
