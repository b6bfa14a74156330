import type { AppDeps } from '../../deps.js';
import { describeCaller } from '../../services/me.js';
import { API_KEY_SECURITY, COMMON_ERRORS, errorResponses } from '../schemas/common.js';
import { MeResponse } from '../schemas/me.js';
import type { TypedApp } from '../typed-app.js';

export async function meRoutes(app: TypedApp, deps: AppDeps): Promise<void> {
  app.get(
    '/me',
    {
      schema: {
        summary: 'Who am I',
        operationId: 'getMe',
        description:
          'The calling key (or session token), its user, organization and workspace (null for an organization key). A session token acts with a member’s rights.',
        tags: ['keys'],
        security: API_KEY_SECURITY,
        response: { 200: MeResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => ({ data: await describeCaller(deps.db, request.principal) }),
  );
}
