import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Static } from 'typebox';
import type { AppDeps } from '../../app.js';
import { accessRequestWorkspace } from '../../services/access.js';
import { projectIndexSummary, rebuildProjectIndex, searchProjectFiles } from '../../services/knowledge.js';
import { requestedWorkspaceId } from '../plugins/auth.js';
import { API_KEY_SECURITY, COMMON_ERRORS, errorResponses } from '../schemas/common.js';
import {
  IndexSummaryResponse,
  KnowledgeParams,
  RebuildResponse,
  SearchQuery,
  SearchResponse,
} from '../schemas/knowledge.js';
import { workspaceHeader } from './projects.js';

const TAGS = ['project knowledge'];

/** The project's index and search (spec/knowledge.md); same access as the project's files. */
export async function knowledgeRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const workspaceOf = async (request: FastifyRequest) =>
    (await accessRequestWorkspace(deps.db, request.principal, requestedWorkspaceId(request))).workspaceId;

  app.get<{ Params: Static<typeof KnowledgeParams> }>(
    '/projects/:projectId/index',
    {
      schema: {
        operationId: 'getProjectIndex',
        summary: "Get a project's index summary",
        description:
          'Files by index status, searchable chunks, the embedding model and whether vectors back search.',
        tags: TAGS,
        security: API_KEY_SECURITY,
        headers: workspaceHeader,
        params: KnowledgeParams,
        response: {
          200: { description: 'The index summary', ...IndexSummaryResponse },
          ...errorResponses(...COMMON_ERRORS),
        },
      },
    },
    async (request) => {
      const workspaceId = await workspaceOf(request);
      return { data: await projectIndexSummary(deps.db, workspaceId, request.params.projectId) };
    },
  );

  app.post<{ Params: Static<typeof KnowledgeParams> }>(
    '/projects/:projectId/index/rebuild',
    {
      schema: {
        operationId: 'rebuildProjectIndex',
        summary: "Rebuild a project's index",
        description:
          "Marks every file of the project for indexing again, in the background. Chunks already indexed stay searchable until each file's new ones replace them.",
        tags: TAGS,
        security: API_KEY_SECURITY,
        headers: workspaceHeader,
        params: KnowledgeParams,
        response: {
          202: { description: 'Indexing again has started', ...RebuildResponse },
          ...errorResponses(...COMMON_ERRORS),
        },
      },
    },
    async (request, reply) => {
      const workspaceId = await workspaceOf(request);
      const result = await rebuildProjectIndex(deps.db, workspaceId, request.params.projectId);
      return reply.code(202).send({ data: result });
    },
  );

  app.get<{ Params: Static<typeof KnowledgeParams>; Querystring: Static<typeof SearchQuery> }>(
    '/projects/:projectId/search',
    {
      schema: {
        operationId: 'searchProject',
        summary: "Search a project's files",
        description:
          'The chunks of indexed files that best match `q`, best first (at most 3 of one file). Files not yet indexed are not found.',
        tags: TAGS,
        security: API_KEY_SECURITY,
        headers: workspaceHeader,
        params: KnowledgeParams,
        querystring: SearchQuery,
        response: {
          200: { description: 'The matching chunks', ...SearchResponse },
          ...errorResponses(...COMMON_ERRORS),
        },
      },
    },
    async (request) => {
      const workspaceId = await workspaceOf(request);
      const results = await searchProjectFiles(deps.db, workspaceId, request.params.projectId, request.query);
      return { data: { results } };
    },
  );
}
