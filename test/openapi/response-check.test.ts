import Fastify, { type FastifySchema } from 'fastify';
import { describe, expect, it } from 'vitest';
import { sendJsonBody } from '../../src/http/json-reply.js';
import { checkResponsesAgainstSchemas, responseViolations } from '../helpers/response-check.js';

describe('the response schema check used by the whole suite', () => {
  it('flags a body that breaks its schema and a status the route does not declare', async () => {
    const app = Fastify();
    checkResponsesAgainstSchemas(app);
    const schema: FastifySchema = {
      response: { 200: { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } } },
    };
    app.get('/x', { schema }, async (request, reply) =>
      (request.query as { fail?: string }).fail ? reply.code(409).send({ n: 1 }) : { n: 1 },
    );
    await app.ready();
    await app.inject({ url: '/x' });
    expect(responseViolations).toEqual([]);
    await app.inject({ url: '/x?fail=1' });
    expect(responseViolations).toEqual(["GET /x → 409: status not declared in the route's response schema"]);
    responseViolations.length = 0;
    await app.close();
  });

  // The listings send bodies the database built, as bytes (sendJsonBody): checked all the same.
  it('also checks a JSON body sent as bytes', async () => {
    const app = Fastify();
    checkResponsesAgainstSchemas(app);
    const schema: FastifySchema = {
      response: { 200: { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } } },
    };
    app.get('/bytes', { schema }, async (_request, reply) => sendJsonBody(reply, Buffer.from('{"n":"one"}')));
    await app.ready();
    const res = await app.inject({ url: '/bytes' });
    expect(res.json()).toEqual({ n: 'one' });
    const seen = [...responseViolations];
    responseViolations.length = 0;
    await app.close();
    expect(seen).toEqual([expect.stringContaining('GET /bytes → 200')]);
  });
});
