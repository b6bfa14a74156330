import { parse as parseContentType } from 'content-type';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { errors } from '../errors.js';
import {
  isPlainJsonWithin,
  JSON_TEXT_LIMITS,
  jsonLimitPassed,
  jsonTextPastLimits,
} from './json-containers.js';
import { whatIsWrongWithJson } from './json-syntax.js';
import { MAX_INPUT_DEPTH, markPlainBody } from './plugins/input-guard.js';
import { type TypedApp, typed } from './typed-app.js';

const MERGE_PATCH_JSON = 'application/merge-patch+json';

const BYTE_ORDER_MARK = 0xfeff;

/** Below this, walking the parsed body (the input guard) costs microseconds: no scan of its text. */
const PLAIN_SCAN_MIN_BYTES = 64 * 1024;

/**
 * JSON between systems is UTF-8 (RFC 8259 §8.1): a body declared in another charset is refused
 * by name rather than decoded as UTF-8 and answered "not valid JSON" (a UTF-16 body) or stored
 * wrong. No charset, a name of UTF-8, or US-ASCII (UTF-8's first 128 characters) is UTF-8.
 */
const UTF8_NAMES = new Set(['utf-8', 'utf8', 'us-ascii', 'ascii']);

/** Of a charset name answered (and logged): the client's text, which may be of any length. */
const MAX_CHARSET_SHOWN = 40;

/**
 * The `charset` parameter of a content type (`content-type`'s parser, RFC 9110 parameters: a
 * `charset=` inside another parameter's quoted value is none). A parameter list that does not
 * parse counts as none, as every content type's parameters did before the charset was read.
 */
function declaredCharset(contentType: string | undefined): string | undefined {
  if (contentType === undefined) return undefined;
  try {
    return parseContentType(contentType).parameters.charset;
  } catch {
    return undefined;
  }
}

function shownCharset(charset: string): string {
  return charset.length > MAX_CHARSET_SHOWN ? `${charset.slice(0, MAX_CHARSET_SHOWN - 1)}…` : charset;
}

/**
 * Registers `contentType` (`application/json`, `application/merge-patch+json`) as a JSON body in
 * `scope` and the scopes registered in it after, one parser for all of them: read as bytes; more
 * than MAX_JSON_CONTAINERS objects and arrays, or MAX_JSON_KEY_NAMES different key names, is a
 * 400 before parsing; decoded strictly (invalid UTF-8 is refused, never stored as U+FFFD); an
 * empty body is no body (common from HTTP clients on POST /sync, DELETE: routes without one
 * accept it, routes that need one still refuse it in validation).
 */
export function addJsonBodyParser(scope: FastifyInstance, contentType: string): void {
  const parseJson = scope.getDefaultJsonParser('error', 'error');
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  if (scope.hasContentTypeParser(contentType)) scope.removeContentTypeParser(contentType);
  scope.addContentTypeParser(
    contentType,
    { parseAs: 'buffer' },
    (request: FastifyRequest, body: Buffer | string, done: (error: Error | null, body?: unknown) => void) => {
      const charset = declaredCharset(request.headers['content-type']);
      if (charset !== undefined && !UTF8_NAMES.has(charset.toLowerCase())) {
        done(
          errors.unsupportedMediaType(
            `The JSON body must be UTF-8 (RFC 8259), not charset=${shownCharset(charset)}`,
            [`${contentType}; charset=utf-8`],
          ),
          undefined,
        );
        return;
      }
      const passed = jsonTextPastLimits(body as Buffer, JSON_TEXT_LIMITS);
      if (passed) {
        const message = `holds ${jsonLimitPassed(passed)}`;
        done(errors.badRequest(`The JSON body ${message}`, [{ path: 'body', message }]), undefined);
        return;
      }
      let text: string;
      try {
        // One leading byte-order mark is dropped here (some Windows tools write one).
        text = utf8.decode(body as Buffer);
      } catch {
        done(errors.badRequest('The JSON body is not valid UTF-8'), undefined);
        return;
      }
      if (text === '') {
        done(null, undefined);
        return;
      }
      // Fastify's parser names application/json whatever type the body was sent as, and says
      // nothing of what is wrong or where.
      const notJson = () => {
        const what = whatIsWrongWithJson(text);
        return errors.badRequest(
          `Body is not valid JSON but content-type is set to '${contentType}': ${what}`,
          [{ path: 'body', message: what }],
        );
      };
      // A second mark is not JSON. Fastify's parser would drop it as it drops a first one, taking
      // a body of two, and a body of two that was malformed besides was answered at the mark.
      if (text.charCodeAt(0) === BYTE_ORDER_MARK) {
        done(notJson(), undefined);
        return;
      }
      parseJson(request, text, (error, value) => {
        const key = error ? refusedPrototypeKey(text) : null;
        if (key) {
          const message = `holds a "${key}" key, which is refused`;
          done(errors.badRequest(`The JSON body ${message}`, [{ path: 'body', message }]), undefined);
        } else if (error) {
          done(notJson(), undefined);
        } else {
          // A large body's text can vouch for it, so the input guard need not walk it.
          if (
            (body as Buffer).length >= PLAIN_SCAN_MIN_BYTES &&
            typeof value === 'object' &&
            value !== null &&
            isPlainJsonWithin(body as Buffer, MAX_INPUT_DEPTH)
          ) {
            markPlainBody(value);
          }
          done(null, value);
        }
      });
    },
  );
}

/**
 * The key that made valid JSON refused (the parser refuses `__proto__` and `constructor.prototype`
 * keys against prototype poisoning), or null when the text is not JSON at all: only read when the
 * parser has refused a body, so that the answer says which it was.
 */
function refusedPrototypeKey(text: string): string | null {
  let found: string | null = null;
  try {
    JSON.parse(text, (key: string, value: unknown) => {
      if (key === '__proto__') found ??= '__proto__';
      else if (
        key === 'constructor' &&
        value !== null &&
        typeof value === 'object' &&
        Object.hasOwn(value, 'prototype')
      )
        found ??= 'constructor.prototype';
      return value;
    });
  } catch {
    return null;
  }
  return found;
}

/**
 * Registers PATCH routes whose bodies are JSON merge patches (RFC 7396), which clients may send as
 * `application/merge-patch+json`, in a scope of their own: the only one parsing that type, so any
 * other route answers it 415 with the types it does take, as its `details.accepted` says. Each route
 * must list the type in its schema's `consumes` (PATCH_BODY_TYPES), which the 415 and the OpenAPI
 * document read: one that does not fails at start.
 */
export async function registerMergePatchRoutes(
  app: TypedApp,
  routes: (scope: TypedApp) => void,
): Promise<void> {
  await app.register(async (scope) => {
    addJsonBodyParser(scope, MERGE_PATCH_JSON);
    scope.addHook('onRoute', (route) => {
      const consumes = (route.schema as { consumes?: string[] } | undefined)?.consumes;
      if (!consumes?.includes(MERGE_PATCH_JSON)) {
        throw new Error(
          `${String(route.method)} ${route.url} parses ${MERGE_PATCH_JSON}: list it in consumes`,
        );
      }
    });
    routes(typed(scope));
  });
}

/**
 * On a route without a body, an empty body is no body whatever type it is labelled with: some
 * HTTP clients set a content type on every request, and Fastify looks for that type's parser
 * even when there is nothing to parse (a 415 for a DELETE with nothing in it). A body with
 * content is still parsed by its type (JSON is read and ignored, others are a 415).
 */
export function ignoreTypeOfEmptyBodies(scope: FastifyInstance): void {
  scope.addHook('onRequest', (request, _reply, done) => {
    const { headers } = request;
    if (
      headers['content-type'] !== undefined &&
      headers['transfer-encoding'] === undefined &&
      (headers['content-length'] === undefined || headers['content-length'] === '0') &&
      (request.routeOptions.schema as { body?: unknown } | undefined)?.body === undefined
    ) {
      delete headers['content-type'];
    }
    done();
  });
}
