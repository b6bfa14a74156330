import { Type } from 'typebox';
import type { AppDeps } from '../../deps.js';
import { accessWorkspaceInPath } from '../../services/access.js';
import { getRun, listRuns } from '../../services/run-history.js';
import { listWorkspaceModels, usageReport } from '../../services/usage-report.js';
import { AgentRun } from '../schemas/agent-runs.js';
import { AgentParams } from '../schemas/agents-admin.js';
import { WorkspaceParams } from '../schemas/agents.js';
import { API_KEY_SECURITY, COMMON_ERRORS, envelope, errorResponses } from '../schemas/common.js';
import { ModelListResponse, UsageQuery, UsageReportResponse } from '../schemas/usage.js';
import type { TypedApp } from '../typed-app.js';

const RunListQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({ minimum: 1, description: 'Page size, default 20; values above 100 are clamped to 100' }),
  ),
  cursor: Type.Optional(
    Type.String({ minLength: 1, maxLength: 1000, description: '`nextCursor` of the previous page' }),
  ),
});

const RunListResponse = envelope(
  Type.Object({
    runs: Type.Array(AgentRun),
    pagination: Type.Object({
      limit: Type.Integer(),
      hasMore: Type.Boolean(),
      nextCursor: Type.Union([Type.String(), Type.Null()]),
    }),
  }),
  'A page of the agent’s runs, newest first',
);

const RunParams = Type.Object({
  agentId: Type.String({ minLength: 1, maxLength: 200, examples: ['agt_demo_assistant'] }),
  runId: Type.String({ minLength: 1, maxLength: 200 }),
});

/** The workspace's models, its usage report, and the history of agent runs (management.md). */
export async function usageRoutes(app: TypedApp, deps: AppDeps): Promise<void> {
  app.get(
    '/workspace/:workspaceId/models',
    {
      schema: {
        summary: 'List the workspace’s models',
        operationId: 'listWorkspaceModels',
        description:
          'The models enabled in the workspace, its default among them, with pricing. Any key of the workspace.',
        tags: ['usage'],
        security: API_KEY_SECURITY,
        params: WorkspaceParams,
        response: { 200: ModelListResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => {
      const access = await accessWorkspaceInPath(deps.db, request.principal, request.params.workspaceId);
      return { data: { models: await listWorkspaceModels(deps.db, deps.models, access) } };
    },
  );

  app.get(
    '/workspace/:workspaceId/usage',
    {
      schema: {
        summary: 'Usage report of a month',
        operationId: 'getUsageReport',
        description:
          'Tokens, cost and requests of the month (UTC), by agent, model and day, with the workspace limits (null when not set). Any key of the workspace; a member’s `byAgent` leaves out agents they cannot see (private ones), whose usage still counts in the totals, `byModel` and `byDay`.',
        tags: ['usage'],
        security: API_KEY_SECURITY,
        params: WorkspaceParams,
        querystring: UsageQuery,
        response: { 200: UsageReportResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => {
      const access = await accessWorkspaceInPath(deps.db, request.principal, request.params.workspaceId);
      return { data: await usageReport(deps.db, access, deps.clock(), request.query.month) };
    },
  );

  app.get(
    '/agents/:agentId/runs',
    {
      schema: {
        summary: 'List an agent’s runs',
        operationId: 'listAgentRuns',
        description: 'Newest first, by cursor. Members see the runs made with their user’s keys.',
        tags: ['agents'],
        security: API_KEY_SECURITY,
        params: AgentParams,
        querystring: RunListQuery,
        response: { 200: RunListResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => ({
      data: await listRuns(deps.db, request.principal, request.params.agentId, request.query),
    }),
  );

  app.get(
    '/agents/:agentId/runs/:runId',
    {
      schema: {
        summary: 'Get a run',
        operationId: 'getAgentRun',
        description:
          'The run as `POST /agents/{agentId}/runs` answered it, its `warnings` and `sources` included (runs stored before migration `033-agent-run-warnings-and-sources` have none).',
        tags: ['agents'],
        security: API_KEY_SECURITY,
        params: RunParams,
        response: { 200: envelope(AgentRun, 'The run'), ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => ({
      data: await getRun(deps.db, request.principal, request.params.agentId, request.params.runId),
    }),
  );
}
