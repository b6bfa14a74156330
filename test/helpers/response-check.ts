import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';

/** Responses whose body did not match the schema their route declares for that status. */
export const responseViolations: string[] = [];

/**
 * Checks every JSON response of a documented route against the schema it declares for that
 * status, so the OpenAPI document is proven by the whole test suite, not by hand. A status the
 * route does not declare is a violation too.
 */
export function checkResponsesAgainstSchemas(app: FastifyInstance): void {
  const ajv = addFormats.default(new Ajv.default({ strict: false, allErrors: true }));
  let schemasAdded = false;
  const compiled = new Map<unknown, ReturnType<typeof ajv.compile>>();

  app.addHook('onSend', async (request, reply, payload) => {
    const declared = request.routeOptions.schema?.response as Record<string, unknown> | undefined;
    if (!declared || request.routeOptions.schema?.hide) return payload;
    const contentType = String(reply.getHeader('content-type') ?? '');
    // Listings send the bytes the database built (sendJsonBody): those are checked too.
    const text = Buffer.isBuffer(payload) ? payload.toString('utf8') : payload;
    if (!contentType.startsWith('application/json') || typeof text !== 'string') return payload;
    const where = `${request.method} ${request.routeOptions.url} → ${reply.statusCode}`;
    const schema = declared[String(reply.statusCode)] ?? declared[`${String(reply.statusCode)[0]}xx`];
    if (!schema) {
      responseViolations.push(`${where}: status not declared in the route's response schema`);
      return payload;
    }
    if (!schemasAdded) {
      for (const shared of Object.values(app.getSchemas())) ajv.addSchema(shared as object);
      schemasAdded = true;
    }
    let validate = compiled.get(schema);
    if (!validate) {
      const body = (schema as { content?: Record<string, { schema: object }> }).content?.['application/json']
        ?.schema;
      validate = ajv.compile(body ?? (schema as object));
      compiled.set(schema, validate);
    }
    if (!validate(JSON.parse(text))) {
      responseViolations.push(`${where}: ${ajv.errorsText(validate.errors)}`);
    }
    return payload;
  });
}
