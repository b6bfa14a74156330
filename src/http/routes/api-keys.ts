import type { AppDeps } from '../../deps.js';
import { accessWorkspaceInPath } from '../../services/access.js';
import {
  createSessionToken,
  createWorkspaceApiKey,
  listApiKeys,
  revokeKey,
} from '../../services/api-key-admin.js';
import { WorkspaceParams } from '../schemas/agents.js';
import {
  ApiKeyListResponse,
  ApiKeyParams,
  CreateApiKeyBody,
  CreateApiKeyResponse,
  CreateSessionTokenBody,
  RevokedResponse,
  SessionTokenResponse,
} from '../schemas/api-keys.js';
import { API_KEY_SECURITY, COMMON_ERRORS, errorResponses } from '../schemas/common.js';
import type { TypedApp } from '../typed-app.js';

/** API keys and session tokens over the API (management.md). */
export async function apiKeyRoutes(app: TypedApp, deps: AppDeps): Promise<void> {
  app.post(
    '/workspace/:workspaceId/api-keys',
    {
      schema: {
        summary: 'Create a workspace API key',
        operationId: 'createApiKey',
        description:
          'Owner or admin. The plaintext key is in this response only (`Cache-Control: no-store`). A live key of the same name → 409 `conflict` (of requests racing for one name, one creates the key); a revoked or expired key no longer holds its name.',
        tags: ['keys'],
        security: API_KEY_SECURITY,
        params: WorkspaceParams,
        body: CreateApiKeyBody,
        response: { 201: CreateApiKeyResponse, ...errorResponses(...COMMON_ERRORS, 409) },
      },
    },
    async (request, reply) => {
      const access = await accessWorkspaceInPath(deps.db, request.principal, request.params.workspaceId);
      const data = await createWorkspaceApiKey(deps, access, request.body);
      return reply.code(201).header('cache-control', 'no-store').send({ data });
    },
  );

  app.get(
    '/workspace/:workspaceId/api-keys',
    {
      schema: {
        summary: 'List workspace API keys',
        operationId: 'listApiKeys',
        description:
          'Owners and admins see every workspace key (revoked ones included), members their own; never the key itself. Session tokens are not listed.',
        tags: ['keys'],
        security: API_KEY_SECURITY,
        params: WorkspaceParams,
        response: { 200: ApiKeyListResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => {
      const access = await accessWorkspaceInPath(deps.db, request.principal, request.params.workspaceId);
      return { data: { apiKeys: await listApiKeys(deps.db, access) } };
    },
  );

  app.delete(
    '/api-keys/:keyId',
    {
      schema: {
        summary: 'Revoke an API key',
        operationId: 'revokeApiKey',
        description:
          'The key stops working at once on every process. Anyone revokes their own keys; owners and admins the workspace keys of users whose role ranks at most their own (an admin revoking an owner’s key → 401 `unauthorized`; a session token counts as a member’s key). Revoking twice gives the same answer; a setup-managed key may be revoked too.',
        tags: ['keys'],
        security: API_KEY_SECURITY,
        params: ApiKeyParams,
        response: { 200: RevokedResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => {
      await revokeKey(deps, request.principal, request.params.keyId);
      return { data: { revoked: true as const } };
    },
  );

  app.post(
    '/workspace/:workspaceId/session-tokens',
    {
      schema: {
        summary: 'Create a session token for a browser app',
        operationId: 'createSessionToken',
        description:
          "Owner or admin. The token acts as a member for `userId` and reaches only the chat routes, agent runs, the agent list and `/v1/me`; with `agentIds`, only those agents. It never outlives the key that makes it: its `expiresAt` is no later than that key's, and once that key is revoked, expires or its user leaves the workspace, the token is refused too.",
        tags: ['keys'],
        security: API_KEY_SECURITY,
        params: WorkspaceParams,
        body: CreateSessionTokenBody,
        response: { 201: SessionTokenResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request, reply) => {
      const access = await accessWorkspaceInPath(deps.db, request.principal, request.params.workspaceId);
      const data = await createSessionToken(deps, access, request.body);
      return reply.code(201).header('cache-control', 'no-store').send({ data });
    },
  );
}
