import type { AppDeps } from '../../deps.js';
import { accessWorkspaceInPath } from '../../services/access.js';
import { AGENT_PAGE, listAgents } from '../../services/agents.js';
import { clampLimit } from '../../services/paging.js';
import { AgentListQuery, AgentListResponse, WorkspaceParams } from '../schemas/agents.js';
import { API_KEY_SECURITY, COMMON_ERRORS, errorResponses } from '../schemas/common.js';
import { sendJsonBody } from '../json-reply.js';
import type { TypedApp } from '../typed-app.js';

export async function agentRoutes(app: TypedApp, deps: AppDeps): Promise<void> {
  app.get(
    '/workspace/:workspaceId/agents',
    {
      schema: {
        summary: 'List agents',
        operationId: 'listAgents',
        description:
          'Non-deleted agents of the workspace with visibility `workspace` or `organization`, by title (case-insensitive), then id. Case-insensitive: each title lower-cased by Unicode’s default rules (in its composed form, NFC), then compared code point by code point, the same on every database: `éa` comes before `Éb`, and both after every title that starts with an ASCII letter.',
        tags: ['agents'],
        security: API_KEY_SECURITY,
        params: WorkspaceParams,
        querystring: AgentListQuery,
        response: { 200: AgentListResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request, reply) => {
      const access = await accessWorkspaceInPath(deps.db, request.principal, request.params.workspaceId);
      const limit = clampLimit(request.query.limit, AGENT_PAGE.defaultLimit, AGENT_PAGE.maxLimit);
      const data = await listAgents(deps.db, deps.models, access, {
        limit,
        offset: request.query.offset ?? 0,
      });
      return sendJsonBody(reply, data);
    },
  );
}
