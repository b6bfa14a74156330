import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config.js';
import { errorExamples } from '../schemas/error-body.js';
import { SHARED_RESPONSE_HEADERS } from '../schemas/headers.js';

/** The document's tags, in the order Swagger UI shows them; every operation has one of these. */
export const OPENAPI_TAGS = [
  { name: 'chat', description: 'Run an agent on a conversation (`POST /v1/chat`), stop or resume its reply' },
  { name: 'chats', description: 'Stored chats and their messages: list, read, rename, delete' },
  {
    name: 'agents',
    description: 'Agents of a workspace: list, read, create, update, delete, and agent runs',
  },
  { name: 'projects', description: 'Projects: instructions, memory and files that join a chat’s context' },
  { name: 'project files', description: 'Files of a project: signed upload and download URLs, sync, tree' },
  { name: 'skills', description: 'Skills (SKILL.md directories): list, bulk upload, delete' },
  { name: 'keys', description: 'The calling key, workspace API keys and session tokens' },
  { name: 'usage', description: 'Token and cost usage of a workspace' },
  { name: 'openai', description: 'OpenAI-compatible Chat Completions and Models (errors in OpenAI’s shape)' },
  {
    name: 'storage',
    description: 'Signed URLs of the fs storage backend: no API key, the signature is the credential',
  },
  { name: 'health', description: 'Liveness and readiness probes, without a key' },
];

// The parts of the document this module reads and writes.
type Response = {
  headers?: Record<string, unknown>;
  content?: Record<string, { schema?: { $ref?: string }; examples?: unknown }>;
};
type Operation = { responses?: Record<string, Response>; security?: unknown[] };
type Document = {
  paths?: Record<string, Record<string, Operation>>;
  components?: { headers?: Record<string, unknown> };
  servers?: Array<{ variables?: Record<string, { default: string }> }>;
};

/** Our error body, and OpenAI's shape under `/v1/openai`. */
const ERROR_BODIES = ['#/components/schemas/Error', '#/components/schemas/OpenAIError'];

const headerRef = (name: keyof typeof SHARED_RESPONSE_HEADERS) => ({
  $ref: `#/components/headers/${name}`,
});

/**
 * Headers that plugins and error handlers add (request id, rate limit, Retry-After, Allow,
 * x-should-retry) are not in any route's schema; they are documented here once and referenced
 * from every response that carries them.
 * Error responses get examples with the codes of their status.
 */
function completeResponses(document: Document): Document {
  document.components ??= {};
  document.components.headers = Object.fromEntries(
    Object.entries(SHARED_RESPONSE_HEADERS).map(([name, { type, description }]) => [
      name,
      { description, schema: { type } },
    ]),
  );
  for (const item of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(item)) {
      const keyed = (operation.security ?? []).length > 0;
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        response.headers = { 'x-request-id': headerRef('x-request-id'), ...response.headers };
        if (keyed) {
          response.headers.RateLimit = headerRef('RateLimit');
          response.headers['RateLimit-Policy'] = headerRef('RateLimit-Policy');
          response.headers['x-ratelimit-limit'] = headerRef('x-ratelimit-limit');
          response.headers['x-ratelimit-remaining'] = headerRef('x-ratelimit-remaining');
        }
        const json = response.content?.['application/json'];
        const body = json?.schema?.$ref;
        if (!json || !ERROR_BODIES.includes(body ?? '')) continue;
        // Both error handlers set these from the error (`retryAfterSeconds`, `allow`).
        if (status === '429' || status === '503') response.headers['Retry-After'] = headerRef('Retry-After');
        if (status === '405') response.headers.Allow = headerRef('Allow');
        // sendOpenAIError says where a retry is futile (routes/openai.ts, retryIsFutile).
        if (body === ERROR_BODIES[1] && ['402', '409', '502'].includes(status)) {
          response.headers['x-should-retry'] = headerRef('x-should-retry');
        }
        const examples = errorExamples(Number(status));
        if (body === ERROR_BODIES[0] && examples) json.examples = examples;
      }
    }
  }
  return document;
}

/**
 * Where "Try it out" and generated clients send requests: `ATRIUM_PUBLIC_URL` when set (the
 * address clients use, as in signed URLs), else a template whose default is this server on
 * localhost, with the scheme and host editable in Swagger UI.
 */
function servers(config: Config) {
  if (config.publicUrl) return [{ url: config.publicUrl, description: 'This server (ATRIUM_PUBLIC_URL)' }];
  return [
    {
      url: '{scheme}://{host}',
      description: 'An Atrium server; the default is `atrium serve` on this machine',
      variables: {
        scheme: { enum: ['http', 'https'], default: 'http' },
        host: { default: `localhost:${config.port}`, description: 'Host and port' },
      },
    },
  ];
}

/**
 * The default server names the port the process listens on, which differs from PORT when
 * PORT=0 (any free port). The document is built on its first request, once listening.
 */
function withListeningPort(document: Document, app: FastifyInstance): Document {
  const address = app.server.listening ? app.server.address() : null;
  const host = document.servers?.[0]?.variables?.host;
  if (host && address && typeof address === 'object') host.default = `localhost:${address.port}`;
  return document;
}

/**
 * The OpenAPI 3.1 document is generated from the route schemas, so it cannot drift from them.
 * Served at `/v1/openapi.json`; `/docs` renders it with the bundled Swagger UI (no CDN).
 */
export async function registerOpenApi(app: FastifyInstance, config: Config): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Atrium API',
        version: '1.0',
        description:
          'Workspace agent and project REST API: chat completions, agent runs, agents, projects, project files and skills. Errors share one body, `{ code, message, details }` (schema `Error`), except under `/v1/openai`, which answers in OpenAI’s shape.',
        license: { name: 'MIT', identifier: 'MIT' },
      },
      servers: servers(config),
      tags: OPENAPI_TAGS,
      components: {
        securitySchemes: {
          apiKey: { type: 'apiKey', in: 'header', name: config.apiKeyHeader },
          bearer: { type: 'http', scheme: 'bearer', description: 'The same API key as a bearer token' },
        },
      },
    },
    refResolver: {
      // Shared schemas ($id Error, Pagination) become named components.
      buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`),
    },
    hideUntagged: false,
    transformObject: (document) =>
      'openapiObject' in document
        ? completeResponses(withListeningPort(document.openapiObject as Document, app))
        : document.swaggerObject,
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: { url: '/v1/openapi.json' },
    staticCSP: false,
  });
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
