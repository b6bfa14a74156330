import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Config } from './config.js';
import type { Db, Dialect } from './db/database.js';
import { registerAuth } from './http/plugins/auth.js';
import { registerCors } from './http/plugins/cors.js';
import { registerErrorHandling, sendError, toApiError } from './http/plugins/error-handler.js';
import { registerInputGuard } from './http/plugins/input-guard.js';
import { registerOpenApi } from './http/plugins/openapi.js';
import { agentRunRoutes } from './http/routes/agent-runs.js';
import { agentRoutes } from './http/routes/agents.js';
import { chatRoutes } from './http/routes/chat.js';
import { healthRoutes } from './http/routes/health.js';
import { openAIRoutes } from './http/routes/openai.js';
import { projectFileRoutes } from './http/routes/project-files.js';
import { projectRoutes } from './http/routes/projects.js';
import { skillRoutes } from './http/routes/skills.js';
import { storageRoutes } from './http/routes/storage.js';
import { Agent } from './http/schemas/agents.js';
import { ChatObject } from './http/schemas/chats.js';
import { ErrorBody, Pagination } from './http/schemas/common.js';
import { OpenAIErrorBody } from './http/schemas/openai.js';
import { ProjectFile, ProjectFileTreeNode } from './http/schemas/project-files.js';
import { Project } from './http/schemas/projects.js';
import { type Clock, newId, systemClock } from './ids.js';
import { ModelRegistry } from './models/registry.js';
import type { Coordination } from './coordination/coordination.js';
import { createMemoryCoordination } from './coordination/memory.js';
import { connectRedis } from './coordination/redis.js';
import { chatsRoutes } from './http/routes/chats.js';
import type { ChatDeps } from './services/chat.js';
import { RunningReplies } from './services/running-replies.js';
import { createObjectStore } from './storage/index.js';
import type { ObjectStore } from './storage/object-store.js';

/** How long shutdown lets replies in progress run on (docs/chat.md), then interrupts them. */
const SHUTDOWN_WAIT_MS = 15_000;
/** How long interrupted replies then get to be stored. */
const SHUTDOWN_STORE_MS = 5_000;

/** Everything the app needs from outside, built once by the caller (server, CLI or test). */
export interface AppDeps {
  config: Config;
  db: Db;
  dialect: Dialect;
  clock: Clock;
  /** Object storage (fs or s3), built from config by createObjectStore unless given. */
  store: ObjectStore;
  /** Model providers and the models registry, built from config unless given. */
  models: ModelRegistry;
  /** How long an agent's MCP server may take to connect before it becomes a warning. */
  mcpConnectTimeoutMs?: number;
  /** Extra readiness checks beyond the database (e.g. storage), by name. */
  readinessChecks?: Record<string, () => Promise<void>>;
  /** Live state shared between processes (Redis), built from config unless given. */
  coordination?: Coordination;
  /** How long shutdown lets replies in progress run on; default 15 s (docs/chat.md). */
  shutdownWaitMs?: number;
}

export interface BuildAppOptions {
  logger?: FastifyServerOptions['logger'];
  /** Runs before any route is registered, so its hooks apply to every route (tests use it). */
  beforeRoutes?: (app: FastifyInstance) => void;
}

function createValidators() {
  // Bodies are validated strictly ("12" is not a number); query strings and params arrive as
  // text, so they are coerced.
  const shared = { allErrors: false, useDefaults: true, removeAdditional: false as const, strict: false };
  const body = addFormats.default(new Ajv.default({ ...shared, coerceTypes: false }));
  const other = addFormats.default(new Ajv.default({ ...shared, coerceTypes: 'array' }));
  return { body, other };
}

/** Builds the app; never listens (only server.ts does), so tests build it without a port. */
export async function buildApp(
  input: Omit<AppDeps, 'clock' | 'store' | 'models'> & {
    clock?: Clock;
    store?: ObjectStore;
    models?: ModelRegistry;
  },
  options: BuildAppOptions = {},
) {
  const clock = input.clock ?? systemClock;
  const store = input.store ?? createObjectStore(input.config, { clock });
  const deps: AppDeps = {
    ...input,
    clock,
    store,
    models: input.models ?? new ModelRegistry(input.config),
    readinessChecks: { storage: () => store.check(), ...input.readinessChecks },
  };
  const app: FastifyInstance = Fastify({
    logger: options.logger ?? {
      level: deps.config.logLevel,
      redact: ['req.headers.authorization', `req.headers["${deps.config.apiKeyHeader}"]`],
      serializers: {
        // Signed URLs carry their signature in the query string: never log it.
        req: (req) => ({ method: req.method, url: req.url.split('?')[0], remoteAddress: req.ip }),
      },
    },
    genReqId: () => newId('req'),
    requestIdHeader: 'x-request-id',
    bodyLimit: deps.config.jsonBodyLimitBytes,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    // Long path parameters reach validation (400 with a path) instead of the router's bare 414.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 1000 },
    // Router failures (bad percent-encoding, a parameter past that length) get the error body too.
    frameworkErrors: (error, _request, reply) => sendError(reply, toApiError(error)),
  });

  const validators = createValidators();
  app.setValidatorCompiler(({ schema, httpPart }) =>
    httpPart === 'body' ? validators.body.compile(schema) : validators.other.compile(schema),
  );
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  const { unmatched } = registerErrorHandling(app);
  await registerCors(app, deps.config);
  options.beforeRoutes?.(app);
  for (const schema of [
    ErrorBody,
    Pagination,
    Agent,
    Project,
    ProjectFile,
    ProjectFileTreeNode,
    ChatObject,
    OpenAIErrorBody,
  ]) {
    app.addSchema(schema);
    validators.body.addSchema(schema);
    validators.other.addSchema(schema);
  }
  const coordination =
    deps.coordination ??
    (deps.config.redisUrl
      ? await connectRedis(deps.config.redisUrl, (error) =>
          app.log.warn({ err: error }, 'redis connection error'),
        )
      : createMemoryCoordination());
  const replies = new RunningReplies(coordination, {
    maxConcurrent: deps.config.maxConcurrentReplies,
    keyPrefix: deps.config.redisKeyPrefix,
  });
  await replies.start();
  const chatDeps: ChatDeps = {
    db: deps.db,
    clock: deps.clock,
    config: deps.config,
    models: deps.models,
    readObject: async (key) => (await deps.store.get(key))?.body ?? null,
    mcpConnectTimeoutMs: deps.mcpConnectTimeoutMs,
    replies,
  };
  // Before the server stops: replies in progress run on for a bounded time, then are stored as
  // interrupted, so shutdown never waits on a hung provider.
  app.addHook('preClose', async () => {
    await replies.drain(deps.shutdownWaitMs ?? SHUTDOWN_WAIT_MS, SHUTDOWN_STORE_MS);
  });
  app.addHook('onClose', async () => {
    if (!input.coordination) await coordination.close();
  });
  await registerOpenApi(app, deps.config);
  await app.register(async (scope) => healthRoutes(scope, deps));
  // Signed URLs of the fs backend: outside /v1 and its key check (the signature is the credential).
  if (deps.store.kind === 'fs') await app.register(async (scope) => storageRoutes(scope, deps));

  await app.register(
    async (v1) => {
      // API bodies are JSON (multipart where a route adds its own parser): plain text is a 415.
      v1.removeContentTypeParser('text/plain');
      // An empty body sent as JSON (common from HTTP clients on POST /sync, DELETE) is no body:
      // routes without one accept it, routes that need one still refuse it in validation.
      const parseJson = v1.getDefaultJsonParser('error', 'error');
      v1.removeContentTypeParser('application/json');
      v1.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
        if (body === '') done(null, undefined);
        else parseJson(request, body as string, done);
      });
      registerAuth(v1, deps);
      registerInputGuard(v1);
      await agentRoutes(v1, deps);
      await projectRoutes(v1, deps);
      await projectFileRoutes(v1, deps);
      await skillRoutes(v1, deps);
      await chatRoutes(v1, chatDeps, deps.config);
      await chatsRoutes(v1, chatDeps);
      await agentRunRoutes(v1, chatDeps);
      await v1.register(async (scope) => openAIRoutes(scope, chatDeps, deps.config, unmatched), {
        prefix: '/openai',
      });
    },
    { prefix: '/v1' },
  );

  return app;
}
