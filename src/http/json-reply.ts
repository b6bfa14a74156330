import type { FastifyReply } from 'fastify';

/**
 * Sends a body built as JSON, `{ "data": … }` where the database built `data`
 * (src/db/json-page.ts), see jsonDataBody. With a JSON content type Fastify sends the bytes as
 * they are, so the body is not parsed or serialized again; the tests check these bodies against
 * the route's response schema as they check every other.
 */
export function sendJsonBody(reply: FastifyReply, body: Buffer): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(body);
}
