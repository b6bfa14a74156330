import type { FastifyReply } from 'fastify';

/**
 * Sends `{ "data": … }` where the database already built `data` as JSON text (src/db/json-page.ts).
 * With a JSON content type Fastify sends a string as it is, so the body is not parsed or
 * serialized again; the tests check these bodies against the route's response schema as they
 * check every other.
 */
export function sendJsonData(reply: FastifyReply, data: string): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(`{"data":${data}}`);
}
