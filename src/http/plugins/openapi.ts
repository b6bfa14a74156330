import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config.js';

/**
 * The OpenAPI 3.1 document is generated from the route schemas, so it cannot drift from them.
 * Served at `/v1/openapi.json`; `/docs` renders it with the bundled Swagger UI (no CDN).
 */
export async function registerOpenApi(app: FastifyInstance, config: Config): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Atrium API',
        version: '1.0',
        description:
          'Workspace agent and project REST API: chat completions, agent runs, agents, projects, project files and skills.',
      },
      servers: [{ url: '/' }],
      components: {
        securitySchemes: {
          apiKey: { type: 'apiKey', in: 'header', name: config.apiKeyHeader },
          bearer: { type: 'http', scheme: 'bearer', description: 'The same API key as a bearer token' },
        },
      },
    },
    refResolver: {
      // Shared schemas ($id Error, Pagination) become named components.
      buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`),
    },
    hideUntagged: false,
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: { url: '/v1/openapi.json' },
    staticCSP: false,
  });
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
