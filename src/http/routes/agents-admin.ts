import type { AppDeps } from '../../deps.js';
import { registerMergePatchRoutes } from '../json-body.js';
import { createAgent, deleteAgent, getAgentDetail, patchAgent } from '../../services/agent-admin.js';
import { accessWorkspaceInPath } from '../../services/access.js';
import {
  AgentDetailResponse,
  AgentParams,
  CreateAgentBody,
  DeletedResponse,
  PatchAgentBody,
} from '../schemas/agents-admin.js';
import { WorkspaceParams } from '../schemas/agents.js';
import { API_KEY_SECURITY, COMMON_ERRORS, errorResponses, PATCH_BODY_TYPES } from '../schemas/common.js';
import type { TypedApp } from '../typed-app.js';

/** Agent create, read, merge-patch and soft delete (management.md). */
export async function agentAdminRoutes(app: TypedApp, deps: AppDeps): Promise<void> {
  app.post(
    '/workspace/:workspaceId/agents',
    {
      schema: {
        summary: 'Create an agent',
        operationId: 'createAgent',
        description:
          'Owner or admin. The agent is managed by the API (`managedBy: "api"`). A duplicate title → 409 `conflict` (of requests racing for one title, one creates the agent).',
        tags: ['agents'],
        security: API_KEY_SECURITY,
        params: WorkspaceParams,
        body: CreateAgentBody,
        response: { 201: AgentDetailResponse, ...errorResponses(...COMMON_ERRORS, 409) },
      },
    },
    async (request, reply) => {
      const access = await accessWorkspaceInPath(deps.db, request.principal, request.params.workspaceId);
      const agent = await createAgent(deps, access, request.body);
      return reply.code(201).send({ data: { agent } });
    },
  );

  app.get(
    '/agents/:agentId',
    {
      schema: {
        summary: 'Get an agent',
        operationId: 'getAgent',
        description:
          "The list fields plus instructions, tools (header values, and a url's user name, password and query values, shown as `***`), orchestration and managedBy. Members see listed agents only.",
        tags: ['agents'],
        security: API_KEY_SECURITY,
        params: AgentParams,
        response: { 200: AgentDetailResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => ({
      data: { agent: await getAgentDetail(deps, request.principal, request.params.agentId) },
    }),
  );

  await registerMergePatchRoutes(app, (scope) => {
    scope.patch(
      '/agents/:agentId',
      {
        schema: {
          summary: 'Update an agent',
          operationId: 'updateAgent',
          description:
            'Owner or admin. Merge patch: absent fields stay, `null` clears an optional field. A tool url or header sent back as `***` (as read) keeps its stored value. A title another agent of the workspace has → 409 `conflict`. An agent of the setup file → 409 `managed_by_setup`.',
          tags: ['agents'],
          security: API_KEY_SECURITY,
          params: AgentParams,
          consumes: PATCH_BODY_TYPES,
          body: PatchAgentBody,
          response: { 200: AgentDetailResponse, ...errorResponses(...COMMON_ERRORS, 409) },
        },
      },
      async (request) => ({
        data: { agent: await patchAgent(deps, request.principal, request.params.agentId, request.body) },
      }),
    );
  });

  app.delete(
    '/agents/:agentId',
    {
      schema: {
        summary: 'Delete an agent',
        operationId: 'deleteAgent',
        description:
          'Owner or admin. Soft delete: the agent leaves lists, and chats with it answer 404. An agent of the setup file → 409 `managed_by_setup`.',
        tags: ['agents'],
        security: API_KEY_SECURITY,
        params: AgentParams,
        response: { 200: DeletedResponse, ...errorResponses(...COMMON_ERRORS, 409) },
      },
    },
    async (request) => {
      await deleteAgent(deps, request.principal, request.params.agentId);
      return { data: { deleted: true as const } };
    },
  );
}
