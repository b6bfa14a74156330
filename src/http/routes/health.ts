import { Type } from 'typebox';
import type { AppDeps } from '../../deps.js';
import { errorResponses, PROTOCOL_ERRORS } from '../schemas/common.js';
import { databaseConnectTimeoutMs, pingDatabase } from '../../db/database.js';
import type { TypedApp } from '../typed-app.js';
import type { FastifyRequest } from 'fastify';

const Checks = Type.Record(Type.String(), Type.Union([Type.Literal('ok'), Type.Literal('unavailable')]), {
  description:
    'Each dependency the process cannot serve without (`database`, `storage`), and `shutdown` (`unavailable` once the process has begun to shut down)',
  examples: [{ database: 'ok', storage: 'ok', shutdown: 'ok' }],
});

const Readiness = (status: 'ready' | 'unavailable', description: string) =>
  Type.Object(
    {
      status: Type.Literal(status),
      checks: Checks,
      vectors: Type.Union([Type.Literal('available'), Type.Literal('unavailable')], {
        description:
          'Whether the database can search vectors (docs/knowledge.md); without, search is lexical and the service is still ready',
      }),
      redis: Type.Optional(
        Type.Union([Type.Literal('available'), Type.Literal('unavailable')], {
          description:
            'With `REDIS_URL` only: whether Redis answers. Without it the process still serves (stop and resume of replies on other processes answer 503, rate limits go uncounted), so it is not a check: a Redis all processes share going down must not take them all out of the load balancer at once',
        }),
      ),
    },
    { description },
  );

/** Liveness and readiness, outside `/v1` and without a key (operations.md). */
export async function healthRoutes(app: TypedApp, deps: AppDeps): Promise<void> {
  app.get(
    '/healthz',
    {
      schema: {
        summary: 'Liveness',
        operationId: 'getHealth',
        description: 'The process is up and serving; checks nothing else.',
        tags: ['health'],
        security: [],
        response: {
          200: Type.Object({ status: Type.Literal('ok') }, { description: 'The process is alive' }),
          ...errorResponses(...PROTOCOL_ERRORS, 405),
        },
      },
    },
    async () => ({ status: 'ok' as const }),
  );
  app.get(
    '/readyz',
    {
      schema: {
        summary: 'Readiness',
        operationId: 'getReadiness',
        description:
          'Whether the process can serve: the database and object storage answer, and it is not shutting down (`shutdown`). Redis (when configured) is reported in `redis` without deciding it.',
        tags: ['health'],
        security: [],
        response: {
          200: Readiness('ready', 'Every dependency answers'),
          503: Readiness('unavailable', 'A dependency does not answer; see `checks`'),
          ...errorResponses(...PROTOCOL_ERRORS, 405),
        },
      },
    },
    async (request, reply) => {
      const checks: Record<string, 'ok' | 'unavailable'> = {};
      try {
        // Bounded: a probe that hangs tells a load balancer nothing (and some wait it out).
        await pingDatabase(deps.db, databaseConnectTimeoutMs(deps.config.database));
        checks.database = 'ok';
      } catch (error) {
        request.log.warn({ err: error }, 'database not ready');
        checks.database = 'unavailable';
      }
      for (const [name, check] of Object.entries(deps.readinessChecks ?? {})) {
        try {
          if ((await check()) === 'unavailable') {
            request.log.debug(`${name} not ready`);
            checks[name] = 'unavailable';
          } else {
            checks[name] = 'ok';
          }
        } catch (error) {
          request.log.warn({ err: error }, `${name} not ready`);
          checks[name] = 'unavailable';
        }
      }
      const ready = Object.values(checks).every((value) => value === 'ok');
      // Information, not a check: without vector search the service works, lexically. Not asked
      // of a database that did not answer: a detection not yet made would wait on it unbounded.
      const vectors =
        checks.database === 'ok' && (await deps.vectors.support()).available
          ? ('available' as const)
          : ('unavailable' as const);
      // Information too: without Redis the process serves all but what crosses processes.
      const redis = deps.redis ? await redisState(deps.redis, request) : undefined;
      const body = { checks, vectors, ...(redis ? { redis } : {}) };
      return ready
        ? reply.code(200).send({ status: 'ready', ...body })
        : reply.code(503).send({ status: 'unavailable', ...body });
    },
  );
}

async function redisState(
  redis: NonNullable<AppDeps['redis']>,
  request: FastifyRequest,
): Promise<'available' | 'unavailable'> {
  try {
    await redis.ping();
    return 'available';
  } catch (error) {
    // The outage itself is logged once for the process (redis-outage-log.ts), not per probe.
    request.log.debug({ err: error }, 'redis not available');
    return 'unavailable';
  }
}
