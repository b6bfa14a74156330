import type { FastifyRequest } from 'fastify';
import type { AppDeps } from '../../deps.js';
import { accessRequestWorkspace } from '../../services/access.js';
import { projectIndexSummary, rebuildProjectIndex, searchProjectFiles } from '../../services/knowledge.js';
import { requestedWorkspaceId } from '../plugins/auth.js';
import { API_KEY_SECURITY, COMMON_ERRORS, errorResponses, WorkspaceHeader } from '../schemas/common.js';
import {
  IndexSummaryResponse,
  KnowledgeParams,
  RebuildResponse,
  SEARCH_LIMIT_DEFAULT,
  SearchQuery,
  SearchResponse,
} from '../schemas/knowledge.js';
import type { TypedApp } from '../typed-app.js';

const TAGS = ['project files'];

/** The project's index and search (spec/knowledge.md); same access as the project's files. */
export async function knowledgeRoutes(app: TypedApp, deps: AppDeps): Promise<void> {
  const workspaceOf = async (request: FastifyRequest) =>
    (await accessRequestWorkspace(deps.db, request.principal, requestedWorkspaceId(request))).workspaceId;

  app.get(
    '/projects/:projectId/index',
    {
      schema: {
        operationId: 'getProjectIndex',
        summary: "Get a project's index summary",
        description:
          'Files by index status, searchable chunks, the embedding model and whether vectors back search.',
        tags: TAGS,
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: KnowledgeParams,
        response: {
          200: IndexSummaryResponse,
          ...errorResponses(...COMMON_ERRORS),
        },
      },
    },
    async (request) => {
      const workspaceId = await workspaceOf(request);
      return { data: await projectIndexSummary(deps.db, workspaceId, request.params.projectId) };
    },
  );

  app.post(
    '/projects/:projectId/index/rebuild',
    {
      schema: {
        operationId: 'rebuildProjectIndex',
        summary: "Rebuild a project's index",
        description:
          "Marks every file of the project for indexing again, in the background. Chunks already indexed stay searchable until each file's new ones replace them.",
        tags: TAGS,
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: KnowledgeParams,
        response: {
          202: RebuildResponse,
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

  app.get(
    '/projects/:projectId/search',
    {
      schema: {
        operationId: 'searchProject',
        summary: "Search a project's files",
        description:
          'The chunks of indexed files that best match `q`, best first (at most 3 of one file). Files not yet indexed are not found.',
        tags: TAGS,
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: KnowledgeParams,
        querystring: SearchQuery,
        response: {
          200: SearchResponse,
          ...errorResponses(...COMMON_ERRORS),
        },
      },
    },
    async (request) => {
      const workspaceId = await workspaceOf(request);
      const { q, limit = SEARCH_LIMIT_DEFAULT } = request.query;
      const results = await searchProjectFiles(deps.db, workspaceId, request.params.projectId, { q, limit });
      return { data: { results } };
    },
  );
}
