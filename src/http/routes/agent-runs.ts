import { runAgent } from '../../services/agent-runs.js';
import { withIdleTimeoutPaused } from '../idle-timeout-pause.js';
import type { ChatDeps } from '../../services/chat.js';
import { AgentRunBody, AgentRunParams, AgentRunResponse } from '../schemas/agent-runs.js';
import { API_KEY_SECURITY, COMMON_ERRORS, errorResponses } from '../schemas/common.js';
import type { TypedApp } from '../typed-app.js';

export async function agentRunRoutes(app: TypedApp, deps: ChatDeps): Promise<void> {
  app.post(
    '/agents/:agentId/runs',
    {
      schema: {
        summary: 'Run an agent',
        operationId: 'runAgent',
        description:
          'Runs the agent on one message and waits for the reply; creates or continues a chat and records the run. `executionTime` is in milliseconds. A provider failure records the run as `failed` and answers 502/504 with `details.runId` (and `details.messageId` when the chat stored the steps done before it); so does a run stopped before its answer (409 `conflict`) or cut short by a shutdown (503).',
        tags: ['agents'],
        security: API_KEY_SECURITY,
        params: AgentRunParams,
        body: AgentRunBody,
        response: { 200: AgentRunResponse, ...errorResponses(...COMMON_ERRORS, 402, 409, 502, 503, 504) },
      },
    },
    async (request) => {
      const data = await withIdleTimeoutPaused(request, () =>
        runAgent(deps, request.principal, request.params.agentId, request.body),
      );
      return { data };
    },
  );
}
