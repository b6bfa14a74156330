import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { DestinationStream } from 'pino';
import type { AppDeps } from './deps.js';
import {
  DatabaseRateLimitCounter,
  type RateLimitCounter,
  RedisRateLimitCounter,
} from './coordination/rate-limit-counter.js';
import { registerAuth } from './http/plugins/auth.js';
import { registerCors } from './http/plugins/cors.js';
import {
  ROUTER_OPTIONS,
  registerErrorHandling,
  sendError,
  toApiError,
} from './http/plugins/error-handler.js';
import { registerInputGuard } from './http/plugins/input-guard.js';
import { registerOpenApi } from './http/plugins/openapi.js';
import {
  createClientErrorHandler,
  ignoreUnknownExpectations,
  registerHostCheck,
} from './http/plugins/protocol-errors.js';
import { registerRequestTimeouts } from './http/plugins/request-timeouts.js';
import { registerRefusedBodyDrain } from './http/refused-body.js';
import { requestIdFrom } from './http/request-id.js';
import { compiledOnce, sharedSerializerBuilder } from './http/shared-compilers.js';
import { strictQueryIntegers } from './http/query-integers.js';
import { agentRunRoutes } from './http/routes/agent-runs.js';
import { agentAdminRoutes } from './http/routes/agents-admin.js';
import { apiKeyRoutes } from './http/routes/api-keys.js';
import { agentRoutes } from './http/routes/agents.js';
import { chatRoutes } from './http/routes/chat.js';
import { StreamHeartbeat } from './http/stream-heartbeat.js';
import { healthRoutes } from './http/routes/health.js';
import { knowledgeRoutes } from './http/routes/knowledge.js';
import { meRoutes } from './http/routes/me.js';
import { isOpenAIPath, OPENAI_PREFIX, openAIRoutes, sendOpenAIError } from './http/routes/openai.js';
import { projectFileRoutes } from './http/routes/project-files.js';
import { projectRoutes } from './http/routes/projects.js';
import { projectAdminRoutes } from './http/routes/projects-admin.js';
import { skillRoutes } from './http/routes/skills.js';
import { skillAdminRoutes } from './http/routes/skills-admin.js';
import { storageRoutes } from './http/routes/storage.js';
import { usageRoutes } from './http/routes/usage.js';
import { Agent } from './http/schemas/agents.js';
import { AgentDetail } from './http/schemas/agents-admin.js';
import { ApiKeyInfo } from './http/schemas/api-keys.js';
import { ChatObject } from './http/schemas/chats.js';
import { ErrorBody, Pagination } from './http/schemas/common.js';
import { OpenAIErrorBody } from './http/schemas/openai.js';
import { ProjectFile, ProjectFileTreeNode } from './http/schemas/project-files.js';
import { Project, ProjectDetail } from './http/schemas/projects.js';
import { type Clock, newId, systemClock } from './ids.js';
import { addJsonBodyParser, ignoreTypeOfEmptyBodies } from './http/json-body.js';
import { refuseContentEncodings } from './http/content-encoding.js';
import { OneLinePerRequest } from './logging/request-log.js';
import { serializeErrorForLog } from './logging/error-log.js';
import { ModelRegistry } from './models/registry.js';
import { attachKnowledgeVectors, KnowledgeVectors } from './knowledge/vectors.js';
import { createMemoryCoordination } from './coordination/memory.js';
import { chatsRoutes } from './http/routes/chats.js';
import type { ChatDeps } from './services/chat.js';
import { UsageReservations } from './services/usage-reservations.js';
import { RunningReplies } from './services/running-replies.js';
import { createObjectStore } from './storage/index.js';
import type { ObjectStore } from './storage/object-store.js';
import { MAX_LATE_MCP_INITIALIZE_WAITS } from './limits.js';
import { LateAnswerWaits } from './models/tools/mcp-fetch.js';
import { createRedisOutageLog } from './coordination/redis-outage-log.js';

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Writes that outlive their request: a streamed reply is stored after its response ends.
     * `idle()` resolves once the replies running now are stored (tests await it, never poll).
     */
    persistence: { idle(): Promise<void> };
  }
}

/** A request's path without its query string (no array per log line, unlike split). */
function pathOnly(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/** How long shutdown lets replies in progress run on (docs/chat.md), then interrupts them. */
const SHUTDOWN_WAIT_MS = 15_000;
/** How long interrupted replies then get to be stored. */
const SHUTDOWN_STORE_MS = 5_000;
/** Fastify's default plugin timeout: the margin left beyond the drain's own bound. */
const DEFAULT_PLUGIN_TIMEOUT_MS = 10_000;

export interface BuildAppOptions {
  /** Replaces the logger options (benchmarks turn logging off); tests use `logStream` instead. */
  logger?: FastifyServerOptions['logger'];
  /** Where log lines go (default stdout); the app's serializers still apply. */
  logStream?: DestinationStream;
  /** Runs before any route is registered, so its hooks apply to every route (tests use it). */
  beforeRoutes?: (app: FastifyInstance) => void;
}

function createValidators() {
  // Bodies are validated strictly ("12" is not a number); query strings and params arrive as
  // text, so they are coerced. A body is checked up to its first problem (not `allErrors`, whose
  // work on a hostile body AJV's security notes warn about); `verbose` gives that problem its
  // schema and value, which name the values a fixed field takes (validation-unions.ts). Its cost
  // is three more fields on each error object, which AJV builds only where a value fails a keyword.
  const shared = {
    allErrors: false,
    verbose: true,
    useDefaults: true,
    removeAdditional: false as const,
    strict: false,
  };
  const body = addFormats.default(new Ajv.default({ ...shared, coerceTypes: false }));
  const other = addFormats.default(new Ajv.default({ ...shared, coerceTypes: 'array' }));
  return { body, other };
}

/** Builds the app; never listens (only server.ts does), so tests build it without a port. */
export async function buildApp(
  input: Omit<
    AppDeps,
    'clock' | 'store' | 'models' | 'vectors' | 'rateLimitCounter' | 'usageReservations'
  > & {
    clock?: Clock;
    store?: ObjectStore;
    models?: ModelRegistry;
    vectors?: KnowledgeVectors;
    rateLimitCounter?: RateLimitCounter;
  },
  options: BuildAppOptions = {},
) {
  const clock = input.clock ?? systemClock;
  const store =
    input.store ??
    createObjectStore(input.config, {
      clock,
      log: { warn: (details, message) => app.log.warn(details, message) },
    });
  // The app closes what it opens itself; a connection given to it belongs to the caller.
  // Loaded only with REDIS_URL: ioredis is a tenth of the start of a process without it.
  const redisModule = input.config.redis ? await import('./coordination/redis.js') : undefined;
  const ownRedis =
    !input.redis && input.config.redis ? redisModule?.createRedis(input.config.redis.url) : undefined;
  const redis = input.redis ?? ownRedis;
  const models = input.vectors?.models ?? input.models ?? new ModelRegistry(input.config);
  const vectors = input.vectors ?? new KnowledgeVectors(input.db, models, { now: clock });
  // Project search finds its vector side by the database (src/knowledge/vectors.ts).
  attachKnowledgeVectors(vectors);
  const deps: AppDeps = {
    ...input,
    clock,
    store,
    redis,
    models,
    vectors,
    readinessChecks: {
      storage: () => store.check(),
      ...input.readinessChecks,
    },
    rateLimitCounter:
      input.rateLimitCounter ??
      (redis && input.config.redis
        ? new RedisRateLimitCounter(redis, input.config.redis.keyPrefix)
        : new DatabaseRateLimitCounter(input.db)),
    usageReservations: new UsageReservations(input.db, clock),
  };
  const timeouts = deps.config.http;
  const shutdownWaitMs = deps.shutdownWaitMs ?? SHUTDOWN_WAIT_MS;
  const app: FastifyInstance = Fastify({
    // Fastify times every hook of close() with this too, the preClose hook that drains replies
    // included: at its default (10 s), a reply still running 10 s after SIGTERM failed the
    // shutdown ("Plugin did not start in time", exit 1) though the drain may take longer. A
    // plugin that hangs at start is now found after this longer time.
    pluginTimeout: shutdownWaitMs + SHUTDOWN_STORE_MS + DEFAULT_PLUGIN_TIMEOUT_MS,
    logger: options.logger ?? {
      level: deps.config.logLevel,
      serializers: {
        // Signed URLs carry their signature in the query string: never log it. Headers (the API
        // key among them) are left out altogether, so nothing needs redacting on every line.
        req: (req) => ({ method: req.method, url: pathOnly(req.url), remoteAddress: req.ip }),
        // Provider errors carry the whole prompt and response: log the failure, not the conversation.
        err: serializeErrorForLog,
        error: serializeErrorForLog,
      },
      ...(options.logStream ? { stream: options.logStream } : {}),
    },
    logController: new OneLinePerRequest(),
    // A client's x-request-id is used only when it is short and safe to log and echo.
    requestIdHeader: false,
    genReqId: (request) => requestIdFrom(request.headers['x-request-id']) ?? newId('req'),
    bodyLimit: deps.config.jsonBodyLimitBytes,
    http: {
      headersTimeout: timeouts.headersTimeoutMs,
      // How often Node looks for requests past their header deadline: its precision.
      connectionsCheckingInterval: Math.min(1000, Math.max(10, Math.floor(timeouts.headersTimeoutMs / 4))),
      requireHostHeader: false,
    },
    // Body deadlines replace Node's single requestTimeout (request-timeouts.ts).
    requestTimeout: 0,
    keepAliveTimeout: timeouts.keepAliveTimeoutMs,
    connectionTimeout: timeouts.idleTimeoutMs,
    clientErrorHandler: createClientErrorHandler(timeouts),
    // While replies drain on shutdown, the process still answers what they need (stop, resume,
    // reads) in the API's own error body; new replies are refused by RunningReplies (503 with
    // Retry-After) and readiness says `shutdown`, so a load balancer sends no more.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    routerOptions: ROUTER_OPTIONS,
    // Router failures (bad percent-encoding, a parameter past that length) get the error body
    // too: OpenAI's shape under /v1/openai, as every other error there.
    frameworkErrors: (error, request, reply) =>
      isOpenAIPath(request.url)
        ? sendOpenAIError(request, reply, error)
        : sendError(reply, toApiError(error)),
    schemaController: { compilersFactory: { buildSerializer: sharedSerializerBuilder() } },
  });

  // ioredis reconnects by itself; without a listener its errors would go to stderr unformatted.
  // One log for the process's three connections: an outage is a line, not three per attempt.
  const redisOutage = redisModule ? createRedisOutageLog(app.log, () => deps.clock().getTime()) : undefined;
  if (ownRedis) redisOutage?.watch(ownRedis);

  const validators = createValidators();
  const compileBody = compiledOnce((schema) => validators.body.compile(schema as object));
  const compileOther = compiledOnce((schema) => validators.other.compile(schema as object));
  const compileQuery = compiledOnce((schema) =>
    strictQueryIntegers(schema, validators.other.compile(schema as object)),
  );
  app.setValidatorCompiler(({ schema, httpPart }) =>
    httpPart === 'body'
      ? compileBody(schema)
      : httpPart === 'querystring'
        ? compileQuery(schema)
        : compileOther(schema),
  );
  // Callback-style hooks where nothing waits: no promise per request.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    done(null, payload);
  });

  // A refused body gets the base body timeout after its answer, without the per-byte extension.
  const refusedBodies = registerRefusedBodyDrain(app, timeouts.bodyTimeoutMs);
  const { unmatched } = registerErrorHandling(app);
  registerHostCheck(app);
  ignoreUnknownExpectations(app);
  registerRequestTimeouts(app, timeouts);
  await registerCors(app, deps.config);
  options.beforeRoutes?.(app);
  for (const schema of [
    ErrorBody,
    Pagination,
    Agent,
    AgentDetail,
    ApiKeyInfo,
    Project,
    ProjectDetail,
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
    (deps.config.redis && redisModule
      ? redisModule.connectRedis(deps.config.redis.url, (connection) => redisOutage?.watch(connection))
      : createMemoryCoordination());
  const replies = new RunningReplies(coordination, {
    maxConcurrent: deps.config.maxConcurrentReplies,
    // resumable-stream adds its own ':' after the prefix.
    keyPrefix: (deps.config.redis?.keyPrefix ?? 'atrium:').replace(/:+$/, ''),
    // A resume waits this long at most for a reply another process is setting up.
    setUpWaitMs: deps.config.upstreamTimeoutMs,
    stopWaitMs: deps.stopWaitMs,
  });
  app.decorate('persistence', { idle: () => replies.idle() });
  deps.readinessChecks = {
    ...deps.readinessChecks,
    // Expected while draining, and probed every few seconds: no warning per probe.
    shutdown: async () => (replies.isDraining ? 'unavailable' : undefined),
  };
  // With Redis, the subscription waits for a connection: the service starts without it. One that
  // fails is made again until it holds: logged once, and once more when it does.
  let listenFailed = false;
  replies
    .start((error) => {
      if (listenFailed) return;
      listenFailed = true;
      app.log.warn({ err: error }, 'could not listen for stopped replies; trying again every second');
    })
    .then(
      () => listenFailed && app.log.info('listening for stopped replies again'),
      () => undefined,
    );
  const chatDeps: ChatDeps = {
    db: deps.db,
    clock: deps.clock,
    config: deps.config,
    models: deps.models,
    mcpConnectTimeoutMs: deps.mcpConnectTimeoutMs,
    usageReservations: deps.usageReservations,
    fileDownloader: deps.fileDownloader,
    replies,
    lateMcpInitializeWaits: new LateAnswerWaits(MAX_LATE_MCP_INITIALIZE_WAITS),
  };
  deps.usageReservations.start();
  // Before the server stops: replies in progress run on for a bounded time, then are stored as
  // interrupted, so shutdown never waits on a hung provider.
  app.addHook('preClose', async () => {
    await replies.drain(shutdownWaitMs, SHUTDOWN_STORE_MS);
    // Fastify now closes the connections idle at this moment and waits for the others. One whose
    // request is still in flight (an upload) would stay open once answered for the whole
    // keep-alive timeout (72 s by default), and the shutdown with it: from here on a connection
    // closes as soon as it is idle. Node reads this when each answer ends.
    app.server.keepAliveTimeout = 1;
    // Likewise one still reading the rest of a refused body, answered already (refused-body.ts).
    refusedBodies.stopLingering();
  });
  // Streamed answers that go silent get a comment now and then (ATRIUM_STREAM_HEARTBEAT_MS).
  const heartbeat = new StreamHeartbeat(deps.config.http.streamHeartbeatMs);
  app.addHook('onClose', async () => {
    heartbeat.stop();
    await deps.usageReservations.stop();
    if (ownRedis) await redisModule?.closeRedis(ownRedis);
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
      addJsonBodyParser(v1, 'application/json');
      ignoreTypeOfEmptyBodies(v1);
      refuseContentEncodings(v1);
      registerAuth(v1, deps);
      registerInputGuard(v1);
      await agentRoutes(v1, deps);
      await agentAdminRoutes(v1, deps);
      await meRoutes(v1, deps);
      await apiKeyRoutes(v1, deps);
      await usageRoutes(v1, deps);
      await skillAdminRoutes(v1, deps);
      await projectRoutes(v1, deps);
      await projectAdminRoutes(v1, deps);
      await projectFileRoutes(v1, deps);
      await knowledgeRoutes(v1, deps);
      await skillRoutes(v1, deps);
      await chatRoutes(v1, chatDeps, deps.config, heartbeat);
      await chatsRoutes(v1, { ...chatDeps, messagePageBytes: deps.config.messagePageBytes });
      await agentRunRoutes(v1, chatDeps);
      await v1.register(async (scope) => openAIRoutes(scope, chatDeps, deps.config, unmatched, heartbeat), {
        prefix: OPENAI_PREFIX.slice('/v1'.length),
      });
    },
    { prefix: '/v1' },
  );

  return app;
}
