import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../../app.js';
import { pingDatabase } from '../../db/database.js';

/** Liveness and readiness, outside `/v1` and without a key (operations.md). */
export async function healthRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (request, reply) => {
    const checks: Record<string, string> = {};
    try {
      await pingDatabase(deps.db);
      checks.database = 'ok';
    } catch (error) {
      request.log.warn({ err: error }, 'database not ready');
      checks.database = 'unavailable';
    }
    for (const [name, check] of Object.entries(deps.readinessChecks ?? {})) {
      try {
        await check();
        checks[name] = 'ok';
      } catch (error) {
        request.log.warn({ err: error }, `${name} not ready`);
        checks[name] = 'unavailable';
      }
    }
    const ready = Object.values(checks).every((value) => value === 'ok');
    // Information, not a check: without vector search the service works, lexically.
    const vectors = (await deps.vectors.support()).available ? 'available' : 'unavailable';
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'unavailable', checks, vectors });
  });
}
