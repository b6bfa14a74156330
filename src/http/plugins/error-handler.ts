import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import FindMyWay from 'find-my-way';
import { ApiError, type ErrorCode, errors, type ValidationIssue } from '../../errors.js';
import { MAX_PATH_PARAM_LENGTH } from '../../limits.js';
import { bodyTimeoutError } from '../body-deadline.js';
import { isDependencyUnavailable } from '../../network-errors.js';
import { patternMessage } from '../schemas/patterns.js';
import { explainUnions } from '../../validation-unions.js';

const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

const FASTIFY_ERROR_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'bad_request',
  FST_ERR_CTP_INVALID_JSON_BODY: 'bad_request',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'bad_request',
  FST_ERR_CTP_INVALID_TYPE: 'bad_request',
  FST_ERR_VALIDATION: 'bad_request',
};

/** The router's own failures; fixed messages, because Fastify's repeat the URL (signatures included). */
const ROUTER_ERRORS: Record<string, string> = {
  FST_ERR_BAD_URL: 'The URL is not valid: a path segment has bad percent-encoding',
  FST_ERR_MAX_PARAM_LENGTH: `A path parameter is longer than ${MAX_PATH_PARAM_LENGTH} characters`,
};

const CLIENT_STATUS_CODES: Record<number, ErrorCode> = {
  400: 'bad_request',
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
};

function validationIssues(error: FastifyError): ValidationIssue[] {
  const where = error.validationContext === 'querystring' ? 'query' : (error.validationContext ?? 'body');
  return explainUnions(error.validation ?? []).map((issue) => {
    const segments = issue.instancePath.split('/').filter(Boolean);
    const missing = (issue.params as { missingProperty?: string }).missingProperty;
    if (missing) segments.push(missing);
    // The path names a missing field already: AJV's "must have required property 'x'" repeated it.
    const own = missing
      ? 'is required'
      : issue.keyword === 'pattern'
        ? patternMessage(issue.params.pattern)
        : undefined;
    return { path: [where, ...segments].join('.'), message: own ?? issue.message ?? 'is invalid' };
  });
}

/**
 * Any thrown value → the API error it stands for. Storage or the database not answering is a 503
 * the client may retry; other unknown errors become a 500 that says nothing.
 */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  const fastifyError = error as FastifyError;
  if (fastifyError?.validation) {
    const issues = validationIssues(fastifyError);
    const first = issues[0];
    return new ApiError('bad_request', first ? `${first.path} ${first.message}` : 'Invalid request', {
      issues,
    });
  }
  const routerMessage = fastifyError?.code ? ROUTER_ERRORS[fastifyError.code] : undefined;
  if (routerMessage) return new ApiError('bad_request', routerMessage, {}, { cause: error });
  const mapped =
    (fastifyError?.code && FASTIFY_ERROR_CODES[fastifyError.code]) ||
    (fastifyError?.statusCode && CLIENT_STATUS_CODES[fastifyError.statusCode]);
  if (mapped) {
    // Fastify's own messages for these are fixed texts, safe and useful ("Body is too large"); a JSON
    // body's syntax is explained by our own parser (json-syntax.ts), never in V8's words.
    return new ApiError(mapped, fastifyError.message, {}, { cause: error });
  }
  if (fastifyError instanceof SyntaxError) {
    return new ApiError('bad_request', 'Malformed JSON body', {}, { cause: error });
  }
  if (isDependencyUnavailable(error)) return errors.dependencyUnavailable(error);
  return new ApiError('internal_error', 'Internal server error', {}, { cause: error });
}

/** A body over the route's limit says the limit (`details.maxBytes`), as the file and upload routes do. */
function withBodyLimit(error: ApiError, request: FastifyRequest): ApiError {
  const limit = request.routeOptions?.bodyLimit;
  if (error.code !== 'payload_too_large' || error.details.maxBytes !== undefined || !limit) return error;
  return new ApiError(
    error.code,
    error.message,
    { ...error.details, maxBytes: limit },
    { cause: error.cause },
  );
}

/**
 * Fastify's 415 names no type the route takes (for a form, curl's `-d` without a content type,
 * not even the one sent): it says both, and `details.accepted` lists them. A route without a body
 * (DELETE, POST …/sync) says it takes none: it reads a JSON body only to ignore it, for clients
 * that send JSON on every request, so `accepted` still lists that type. The OpenAI-compatible
 * routes' handler uses it too (their body shows the message only).
 */
export function withAcceptedTypes(error: ApiError, request: FastifyRequest): ApiError {
  if ((error.cause as FastifyError | undefined)?.code !== 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return error;
  const schema = request.routeOptions?.schema as { consumes?: string[]; body?: unknown } | undefined;
  const accepted = schema?.consumes ?? ['application/json'];
  const takes =
    schema?.body === undefined
      ? `no body (an ${accepted.join(' or ')} body is ignored)`
      : accepted.join(' or ');
  const sent = request.headers['content-type']?.split(';')[0]?.trim().slice(0, 100);
  return new ApiError(
    error.code,
    `Unsupported Media Type${sent ? `: ${sent}` : ''}; this route takes ${takes}`,
    { ...error.details, accepted },
    { cause: error.cause },
  );
}

export function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  if (typeof error.details.retryAfterSeconds === 'number') {
    reply.header('retry-after', String(error.details.retryAfterSeconds));
  }
  if (Array.isArray(error.details.allow)) reply.header('allow', error.details.allow.join(', '));
  // The rest of a body too slow to wait for is not read: the connection cannot serve another request.
  if (error.code === 'request_timeout') reply.header('connection', 'close');
  return reply.code(error.status).type('application/json; charset=utf-8').send({
    code: error.code,
    message: error.message,
    details: error.details,
  });
}

/**
 * One log line per failed request: 5xx faults at `error` with their cause (serialized without
 * content); a refusal by design (ApiError.refusal: full, shutting down) at its level without a
 * stack; client mistakes at info.
 */
export function logApiError(log: FastifyBaseLogger, apiError: ApiError, message = 'request failed'): void {
  if (apiError.refusal) {
    log[apiError.refusal]({ code: apiError.code, status: apiError.status }, apiError.message);
  } else if (apiError.status >= 500) {
    log.error({ err: apiError.cause ?? apiError, code: apiError.code, status: apiError.status }, message);
  } else {
    log.info({ code: apiError.code, status: apiError.status }, apiError.message);
  }
}

/**
 * The app's router options (app.ts), shared with the table that tells 405 from 404. Long path
 * parameters reach validation (400 with a path) instead of the router's bare 414.
 */
export const ROUTER_OPTIONS = { ignoreTrailingSlash: true, maxParamLength: MAX_PATH_PARAM_LENGTH };

/**
 * One handler renders every failure as the error body: ours, Fastify's (validation, parsing,
 * body limits), and unknown ones. 5xx causes go to the log only.
 */
export function registerErrorHandling(app: FastifyInstance): { unmatched: UnmatchedRoute } {
  // A second router that knows every route, used only to tell 405 from 404. Built with the app's
  // router options: a path the app serves (`/healthz/`, a long id) must be known here too.
  const routeTable = FindMyWay(ROUTER_OPTIONS);
  app.addHook('onRoute', (route) => {
    // The CORS preflight route matches every path; it must not turn a 404 into a 405.
    if (route.url === '*') return;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      try {
        routeTable.on(method as (typeof HTTP_METHODS)[number], route.url, () => {});
      } catch {
        // Duplicate registrations (HEAD added for GET) are harmless here.
      }
    }
  });

  app.setErrorHandler((error: unknown, request: FastifyRequest, reply: FastifyReply) => {
    // A body past its deadline fails its reader in many ways (cut-off upload, broken part): all are that timeout.
    const apiError = withAcceptedTypes(
      withBodyLimit(bodyTimeoutError(request.raw) ?? toApiError(error), request),
      request,
    );
    logApiError(request.log, apiError);
    return sendError(reply, apiError);
  });

  const unmatched = (request: FastifyRequest): ApiError => {
    const path = request.url.split('?')[0];
    const allowed = HTTP_METHODS.filter((method) => routeTable.find(method, path));
    // This table matches a wildcard route's empty remainder (`/storage/objects/`) where Fastify's
    // router does not: a path "allowing" the request's own method is simply not found.
    return allowed.length > 0 && !allowed.includes(request.method as (typeof HTTP_METHODS)[number])
      ? new ApiError('method_not_allowed', `${request.method} is not allowed on ${path}`, { allow: allowed })
      : new ApiError('not_found', `No route ${request.method} ${path}`);
  };
  app.setNotFoundHandler((request: FastifyRequest, reply: FastifyReply) => {
    return sendError(reply, unmatched(request));
  });
  // Fastify parses the body of a request no route matches before its not-found handler runs, with
  // the default parser and limit: a large body to an unknown path was answered 413, and every
  // body was read for nothing. The not-found handler of the request's scope (OpenAI's shape under
  // /v1/openai) answers here instead: after the onRequest hooks (CORS, the key check), before a
  // byte of the body is read. What the client still sends is the refused-body drain's (refused-body.ts).
  app.addHook('preParsing', (request, reply, payload, done) => {
    if (request.is404) request.routeOptions.handler.call(app, request, reply);
    else done(null, payload);
  });
  return { unmatched };
}

/** Tells an unknown path (404) from a known path with the wrong method (405, `details.allow`). */
export type UnmatchedRoute = (request: FastifyRequest) => ApiError;
