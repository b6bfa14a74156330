import { compileErrors, validate } from '@readme/openapi-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { rawExchange } from '../helpers/raw-http.js';

interface Operation {
  security?: unknown;
  requestBody?: { content: Record<string, unknown> };
  responses: Record<string, { content?: Record<string, { schema?: { $ref?: string } }> }>;
}
interface Document {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, unknown>; schemas: Record<string, unknown> };
}

let t: Awaited<ReturnType<typeof createTestApp>>;
let doc: Document;
/** Every route the app registers and shows in the document: `METHOD /path/{}` (params unnamed). */
const shownRoutes = new Set<string>();
const unnamedParams = (path: string) =>
  path
    .split('/')
    .map((segment) => (/^[:{*]/.test(segment) ? '{}' : segment))
    .join('/');
beforeAll(async () => {
  t = await createTestApp({
    beforeRoutes: (app) =>
      app.addHook('onRoute', (route) => {
        if ((route.schema as { hide?: boolean } | undefined)?.hide) return;
        for (const method of [route.method].flat()) {
          if (method !== 'HEAD') shownRoutes.add(`${method} ${unnamedParams(route.url)}`);
        }
      }),
  });
  const res = await t.app.inject({ method: 'GET', url: '/v1/openapi.json' });
  expect(res.statusCode).toBe(200);
  doc = res.json();
});
afterAll(() => t.close());

describe('OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document with version 1.0', async () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('1.0');
    // The validator dereferences in place, so give it a copy.
    const result = await validate(structuredClone(doc) as Parameters<typeof validate>[0]);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
  });

  it('documents the API key header as the security scheme', () => {
    expect(doc.components.securitySchemes.apiKey).toEqual({
      type: 'apiKey',
      in: 'header',
      name: 'x-service-api-key',
    });
  });

  it('documents every /v1 route with its security and the shared error body for each error status', () => {
    const operations = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item).map(([method, op]) => ({ path, method, op })),
    );
    expect(
      new Set(operations.map(({ path, method }) => `${method.toUpperCase()} ${unnamedParams(path)}`)),
    ).toEqual(shownRoutes);
    expect(operations).toHaveLength(shownRoutes.size);
    for (const { path, method, op } of operations.filter((o) => o.path.startsWith('/v1/'))) {
      const where = `${method.toUpperCase()} ${path}`;
      expect(op.security, where).toEqual([{ apiKey: [] }, { bearer: [] }]);
      for (const status of ['400', '401', '404', '500']) {
        const schema = op.responses[status]?.content?.['application/json']?.schema;
        // The OpenAI-compatible routes answer errors in OpenAI's shape (spec/openai-compatible.md).
        const body = path.startsWith('/v1/openai/') ? 'OpenAIError' : 'Error';
        expect(schema?.$ref, `${where} ${status}`).toBe(`#/components/schemas/${body}`);
      }
    }
  });

  it('documents that every PATCH takes a JSON merge patch under either content type (docs/api.md)', () => {
    const patches = Object.entries(doc.paths).flatMap(([path, item]) =>
      item.patch ? [{ path, types: Object.keys(item.patch.requestBody?.content ?? {}) }] : [],
    );
    expect(patches.length).toBeGreaterThan(0);
    for (const { path, types } of patches) {
      expect(types, path).toEqual(['application/json', 'application/merge-patch+json']);
    }
  });

  it('documents the citations of a chat reply and an agent run (`sources`)', () => {
    interface JsonSchema {
      type?: string;
      properties: Record<string, JsonSchema>;
      items: JsonSchema;
      required?: string[];
    }
    const jsonSchemaOf = (path: string) =>
      doc.paths[path]?.post?.responses['200']?.content?.['application/json']?.schema as unknown as JsonSchema;
    const chat = jsonSchemaOf('/v1/chat');
    const run = jsonSchemaOf('/v1/agents/{agentId}/runs');
    for (const sources of [chat.properties.sources!, run.properties.data!.properties.sources!]) {
      expect(sources.type).toBe('array');
      expect(Object.keys(sources.items.properties)).toEqual(['n', 'fileId', 'path', 'pages', 'heading']);
      expect(sources.items.required).toEqual(['n', 'fileId', 'path', 'pages', 'heading']);
    }
    expect(chat.required).not.toContain('sources');
  });

  it('marks nothing that has a default as required: a client may leave it out', () => {
    interface Schema {
      $ref?: string;
      default?: unknown;
      required?: string[];
      properties?: Record<string, Schema>;
      items?: Schema;
      additionalProperties?: Schema | boolean;
      anyOf?: Schema[];
      oneOf?: Schema[];
      allOf?: Schema[];
    }
    interface Parameter {
      in: string;
      name: string;
      required?: boolean;
      schema?: Schema;
    }
    const resolve = (schema: Schema | undefined): Schema | undefined => {
      let current = schema;
      while (current?.$ref) {
        current = current.$ref
          .split('/')
          .slice(1)
          .reduce<unknown>((node, key) => (node as Record<string, unknown>)[key], doc) as Schema;
      }
      return current;
    };
    const problems: string[] = [];
    const seen = new Set<Schema>();
    const walk = (given: Schema | undefined, where: string): void => {
      const schema = resolve(given);
      if (!schema || seen.has(schema)) return;
      seen.add(schema);
      for (const name of schema.required ?? []) {
        if (resolve(schema.properties?.[name])?.default !== undefined) problems.push(`${where}.${name}`);
      }
      for (const [name, property] of Object.entries(schema.properties ?? {}))
        walk(property, `${where}.${name}`);
      if (schema.items) walk(schema.items, `${where}[]`);
      if (typeof schema.additionalProperties === 'object') walk(schema.additionalProperties, `${where}{}`);
      for (const part of [...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])]) {
        walk(part, where);
      }
    };
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        const where = `${method.toUpperCase()} ${path}`;
        const parameters = (op as Operation & { parameters?: Parameter[] }).parameters ?? [];
        for (const parameter of parameters) {
          if (parameter.required && parameter.schema?.default !== undefined) {
            problems.push(`${where} ${parameter.in} ${parameter.name}`);
          }
        }
        for (const [type, content] of Object.entries(op.requestBody?.content ?? {})) {
          walk((content as { schema?: Schema }).schema, `${where} ${type} body`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('describes every operation beyond its summary', () => {
    const bare = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item).flatMap(([method, op]) =>
        (op as { description?: string }).description?.trim() ? [] : [`${method.toUpperCase()} ${path}`],
      ),
    );
    expect(bare).toEqual([]);
  });

  it('documents no JSON body that refuses unknown fields: the API ignores them (docs/api.md)', () => {
    const refusing = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item).flatMap(([method, op]) => {
        const schema = op.requestBody?.content['application/json'] as
          { schema?: { additionalProperties?: unknown } } | undefined;
        return schema?.schema?.additionalProperties === false ? [`${method.toUpperCase()} ${path}`] : [];
      }),
    );
    expect(refusing).toEqual([]);
  });

  it('documents an MCP tool url as taken up to 8000 characters (a url as read is longer than stored) and read without a cap', () => {
    interface UrlSchema {
      maxLength?: number;
    }
    interface ToolsSchema {
      properties: { tools: { items: { properties: { url: UrlSchema } } } };
    }
    const bodyOf = (path: string, method: 'post' | 'patch') =>
      (doc.paths[path]?.[method]?.requestBody?.content['application/json'] as { schema: ToolsSchema }).schema;
    for (const body of [
      bodyOf('/v1/workspace/{workspaceId}/agents', 'post'),
      bodyOf('/v1/agents/{agentId}', 'patch'),
    ]) {
      const tools = body.properties.tools as unknown as { anyOf?: ToolsSchema['properties']['tools'][] };
      // PATCH wraps each field in anyOf [field, null].
      const url = (tools.anyOf?.[0] ?? body.properties.tools).items.properties.url;
      expect(url.maxLength).toBe(8000);
    }
    const detail = doc.components.schemas.AgentDetail as ToolsSchema;
    expect(detail.properties.tools.items.properties.url.maxLength).toBeUndefined();
  });

  it('documents the three OpenAI-compatible routes', () => {
    type Operation = {
      responses: Record<string, { content: Record<string, unknown> }>;
      requestBody: { content: Record<string, { schema: { required: string[] } }> };
    };
    const paths = doc.paths as Record<string, Record<string, Operation>>;
    expect(Object.keys(paths['/v1/openai/models'] ?? {})).toContain('get');
    expect(Object.keys(paths['/v1/openai/models/{model}'] ?? {})).toContain('get');
    const create = paths['/v1/openai/chat/completions']!.post!;
    expect(Object.keys(create.responses['200'].content)).toEqual(['application/json', 'text/event-stream']);
    expect(create.requestBody.content['application/json'].schema.required).toEqual(['model', 'messages']);
  });

  // The OpenAI SDKs honour it before their own retry rules (docs/openai.md, Errors): a client
  // generated from the document must know the header is there.
  it('documents x-should-retry on the OpenAI-compatible errors that send it (402, 409, 502)', () => {
    const create = doc.paths['/v1/openai/chat/completions']!.post! as unknown as {
      responses: Record<string, { headers?: Record<string, unknown> }>;
    };
    for (const status of ['402', '409', '502']) {
      expect(create.responses[status]?.headers?.['x-should-retry'], status).toEqual({
        $ref: '#/components/headers/x-should-retry',
      });
    }
    expect(create.responses['400']?.headers).not.toHaveProperty('x-should-retry');
  });

  // Node's HTTP parser answers these before any route is known, in Atrium's shape on every route
  // (docs/api.md, docs/openai.md "Errors"): headers over 16 KB (431), headers too slow (408), a
  // malformed request (400); a missing Host is a 400 of every route too.
  it('declares the errors answered before routing (400, 408, 431) on every operation', async () => {
    const missing: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        for (const status of ['400', '408', '431']) {
          if (!op.responses[status]) missing.push(`${method.toUpperCase()} ${path} ${status}`);
        }
        const body = op.responses['431']?.content?.['application/json']?.schema?.$ref;
        if (body !== '#/components/schemas/Error') missing.push(`${method.toUpperCase()} ${path} 431 Error`);
      }
    }
    expect(missing).toEqual([]);
    // The route's schema is checked too (test/setup.ts): the 400 is one the route declares.
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as { port: number };
    const noHost = await rawExchange(port, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(noHost.status).toBe(400);
    expect(JSON.parse(noHost.body).message).toBe('The Host header is required (HTTP/1.1)');
  });

  // docs/openai.md, Storing: a chat is named by these headers; a generated client sends only
  // the parameters the document declares.
  it('declares the headers that name the chat of an OpenAI-compatible completion', () => {
    const create = doc.paths['/v1/openai/chat/completions']!.post! as unknown as {
      parameters?: Array<{ in: string; name: string; required?: boolean; schema: object }>;
    };
    const headers = (create.parameters ?? []).filter((parameter) => parameter.in === 'header');
    expect(headers.map(({ name, required, schema }) => ({ name, required, schema }))).toEqual([
      { name: 'x-atrium-chat-id', required: false, schema: { type: 'string' } },
      {
        name: 'x-atrium-conversation-key',
        required: false,
        schema: { type: 'string', minLength: 1, maxLength: 128 },
      },
    ]);
  });

  // docs/files.md, "Signed URLs": the storage routes read these themselves; a generated client
  // sends only the header parameters the document declares.
  it('declares the Range and conditional request headers the signed storage routes honour', () => {
    const headersOf = (method: string) =>
      (
        (doc.paths['/storage/objects/{path}']?.[method] as unknown as {
          parameters?: Array<{ in: string; name: string; required?: boolean }>;
        }) ?? {}
      ).parameters
        ?.filter((parameter) => parameter.in === 'header')
        .map(({ name, required }) => ({ name: name.toLowerCase(), required })) ?? [];
    const optional = (...names: string[]) => names.map((name) => ({ name, required: false }));
    expect(headersOf('get')).toEqual(
      optional('range', 'if-range', 'if-match', 'if-none-match', 'if-modified-since', 'if-unmodified-since'),
    );
    expect(headersOf('put')).toEqual(optional('if-match', 'if-none-match', 'if-unmodified-since'));
  });

  // docs/api.md: the AI SDK's client tells a UI message stream by this header.
  it('declares x-vercel-ai-ui-message-stream on the streamed chat and on its resume', () => {
    const headersOf = (path: string, method: string) =>
      (doc.paths[path]?.[method]?.responses['200'] as { headers?: Record<string, unknown> } | undefined)
        ?.headers ?? {};
    for (const [path, method] of [
      ['/v1/chat', 'post'],
      ['/v1/chat/{chatId}/stream', 'get'],
    ] as const) {
      expect(headersOf(path, method)['x-vercel-ai-ui-message-stream'], path).toMatchObject({
        schema: { type: 'string', const: 'v1' },
      });
    }
  });

  // A generated client reads a declared body: the download's 304 declared `application/json`
  // of any shape, which a client would try to parse from an empty body.
  it('declares no body for a response that has none (204, 304)', () => {
    const withBody = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item).flatMap(([method, op]) =>
        Object.entries(op.responses)
          .filter(([status, response]) => ['204', '304'].includes(status) && response.content)
          .map(([status]) => `${method.toUpperCase()} ${path} ${status}`),
      ),
    );
    expect(withBody).toEqual([]);
  });

  it('serves a docs page', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/docs/' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
  });
});

describe('OpenAPI servers', () => {
  it('names the port the server listens on, also with PORT=0 (any free port)', async () => {
    const app = await createTestApp({ env: { PORT: '0' } });
    try {
      await app.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = app.app.server.address() as { port: number };
      const res = await fetch(`http://127.0.0.1:${port}/v1/openapi.json`);
      const document = (await res.json()) as { servers: Array<{ variables: { host: { default: string } } }> };
      // Before: "localhost:0", what Swagger UI's "Try it out" and generated clients then called.
      expect(document.servers[0]!.variables.host.default).toBe(`localhost:${port}`);
    } finally {
      await app.close();
    }
  });
});

describe('OpenAPI x-workspace-id', () => {
  it('documents the header on every route where an organization key must send it', async () => {
    const tenancy = await createTestApp({ setup: TENANCY_SETUP });
    try {
      const document = (await tenancy.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as {
        paths: Record<
          string,
          Record<string, { requestBody?: unknown; parameters?: { in: string; name: string }[] }>
        >;
      };
      const needing: string[] = [];
      const undocumented: string[] = [];
      for (const [path, item] of Object.entries(document.paths)) {
        for (const [method, op] of Object.entries(item)) {
          // A body is validated before the handler asks for the workspace: those routes answer 400 first.
          if (!path.startsWith('/v1/') || op.requestBody) continue;
          const res = await tenancy.app.inject({
            method: method.toUpperCase() as 'GET',
            url: path.replaceAll(/\{[^}]+\}/g, 'x'),
            headers: { authorization: `Bearer ${KEYS.acmeOrg}` },
          });
          if (!res.body.includes('must name a workspace in the x-workspace-id header')) continue;
          needing.push(`${method.toUpperCase()} ${path}`);
          const declared = op.parameters?.some((p) => p.in === 'header' && p.name === 'x-workspace-id');
          if (!declared) undocumented.push(`${method.toUpperCase()} ${path}`);
        }
      }
      expect(needing).toContain('GET /v1/projects');
      expect(undocumented).toEqual([]);
    } finally {
      await tenancy.close();
    }
  });
});
