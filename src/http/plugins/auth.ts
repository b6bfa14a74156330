import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppDeps } from '../../app.js';
import { authenticateKey, type Principal } from '../../services/access.js';
import { type RateLimitState, RateLimiter, rateLimitedError, rateLimitHeaders } from './rate-limit.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
}

function presentedKey(request: FastifyRequest, headerName: string): string | undefined {
  const header = request.headers[headerName];
  if (typeof header === 'string' && header.length > 0) return header;
  const authorization = request.headers.authorization;
  if (authorization?.startsWith('Bearer ')) return authorization.slice('Bearer '.length).trim() || undefined;
  return undefined;
}

/**
 * Authenticates every request of the scope it is registered in, before the body is read, then
 * applies the per-key rate limit.
 */
export function registerAuth(app: FastifyInstance, deps: AppDeps): void {
  const limiter = new RateLimiter(deps.rateLimitCounter, () => deps.clock().getTime());
  app.decorateRequest('principal', null as unknown as Principal);
  app.addHook('onRequest', async (request, reply) => {
    const principal = await authenticateKey(
      deps.db,
      presentedKey(request, deps.config.apiKeyHeader),
      deps.clock(),
    );
    const limit = principal.rateLimitPerMinute ?? deps.config.defaultRateLimitPerMinute;
    let state: RateLimitState | undefined;
    try {
      state = await limiter.hit(principal.keyId, limit);
    } catch (error) {
      // The shared counter is unreachable (Redis down): serve uncounted rather than refuse all.
      request.log.warn({ err: error }, 'rate limit not counted: its store failed');
    }
    if (state) {
      reply.headers(rateLimitHeaders(state));
      if (state.exceeded) throw rateLimitedError(state);
    }
    request.principal = principal;
  });
}

/** The `x-workspace-id` header an organization key uses to pick a workspace. */
export function requestedWorkspaceId(request: FastifyRequest): string | undefined {
  const value = request.headers['x-workspace-id'];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}
