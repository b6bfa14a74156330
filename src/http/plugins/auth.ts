import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppDeps } from '../../deps.js';
import { apiKeyCache } from '../../auth/key-cache.js';
import { authenticateKey, type KeyRowCache, type Principal } from '../../services/access.js';
import { type RateLimitState, RateLimiter, rateLimitedError, rateLimitHeaders } from './rate-limit.js';
import { errors } from '../../errors.js';
import { atMostEvery } from '../../logging/at-most-every.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
}

/** `Bearer <token>`; the scheme in any case, as auth schemes are (RFC 9110 §11.1). */
const BEARER = /^bearer +(.*)$/is;

function presentedKey(request: FastifyRequest, headerName: string): string | undefined {
  const header = request.headers[headerName];
  if (typeof header === 'string' && header.length > 0) return header;
  const bearer = BEARER.exec(request.headers.authorization ?? '');
  return bearer?.[1]!.trim() || undefined;
}

/**
 * An Authorization header holding something other than a bearer token: most often a key pasted
 * without `Bearer `, which deserves its own hint (the header's value is never echoed).
 */
function withoutScheme(request: FastifyRequest): boolean {
  const authorization = request.headers.authorization?.trim();
  return Boolean(authorization) && !/^bearer(\s|$)/i.test(authorization!);
}

/**
 * The routes a session token reaches (management.md): chats, runs, the agent list and `/me`.
 * Matched on the route pattern, so chat routes added later under these paths are covered.
 */
const SESSION_ROUTES = [
  /^\/v1\/chat(\/|$)/,
  /^\/v1\/chats(\/|$)/,
  /^\/v1\/agents\/:agentId\/runs(\/|$)/,
  /^\/v1\/workspace\/:workspaceId\/agents$/,
  /^\/v1\/me$/,
];

function sessionMayReach(request: FastifyRequest): boolean {
  const route = request.routeOptions.url;
  // An unknown path answers 404 whoever asks.
  if (route === undefined) return true;
  if (
    route === '/v1/workspace/:workspaceId/agents' &&
    request.method !== 'GET' &&
    request.method !== 'HEAD'
  ) {
    return false;
  }
  return SESSION_ROUTES.some((pattern) => pattern.test(route));
}

/** How often requests served uncounted (the rate limit's store failing) are logged, at most. */
const UNCOUNTED_LOG_INTERVAL_MS = 30_000;

/**
 * Authenticates every request of the scope it is registered in, before the body is read, then
 * applies the per-key rate limit.
 */
export function registerAuth(app: FastifyInstance, deps: AppDeps): void {
  const limiter = new RateLimiter(deps.rateLimitCounter, () => deps.clock().getTime());
  const keyCache: KeyRowCache | undefined = apiKeyCache(deps.db);
  const uncountedLog = atMostEvery(UNCOUNTED_LOG_INTERVAL_MS);
  app.decorateRequest('principal', null as unknown as Principal);
  app.addHook('onRequest', async (request, reply) => {
    const key = presentedKey(request, deps.config.apiKeyHeader);
    if (!key) throw errors.missingApiKey(deps.config.apiKeyHeader, withoutScheme(request));
    const principal = await authenticateKey(deps.db, key, deps.clock(), keyCache);
    // The headers show the count nearest its limit (an organization key has two, see below).
    let shown: RateLimitState | undefined;
    const count = async (counter: string, limit: number) => {
      let state: RateLimitState | undefined;
      try {
        state = await limiter.hit(counter, limit);
      } catch (error) {
        // The shared counter is unreachable (Redis down): serve uncounted rather than refuse all.
        uncountedLog((heldBack) =>
          request.log.warn(
            { err: error, ...(heldBack > 0 ? { alsoUncounted: heldBack } : {}) },
            `rate limit not counted: its store failed (logged at most every ${UNCOUNTED_LOG_INTERVAL_MS / 1000} s)`,
          ),
        );
      }
      if (state) {
        if (!shown || state.exceeded || state.remaining < shown.remaining) {
          shown = state;
          reply.headers(rateLimitHeaders(state));
        }
        if (state.exceeded) throw rateLimitedError(state);
      }
    };
    await count(principal.keyId, principal.rateLimitPerMinute ?? deps.config.defaultRateLimitPerMinute);
    if (principal.kind === 'organization') {
      // An organization key acts in any workspace of its organization: each workspace's own limit
      // holds for it too, counted per key and workspace, once per request.
      const counted = new Set<string>();
      principal.countIn = async (workspaceId, limit) => {
        if (limit === null || counted.has(workspaceId)) return;
        counted.add(workspaceId);
        await count(`${principal.keyId}@${workspaceId}`, limit);
      };
    }
    request.principal = principal;
    if (principal.kind === 'session' && !sessionMayReach(request)) {
      throw errors.unauthorized('A session token reaches only the chat, run, agent list and /me routes');
    }
  });
}

/** The `x-workspace-id` header an organization key uses to pick a workspace. */
export function requestedWorkspaceId(request: FastifyRequest): string | undefined {
  const value = request.headers['x-workspace-id'];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}
