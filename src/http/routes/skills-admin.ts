import { Type } from 'typebox';
import type { AppDeps } from '../../deps.js';
import { deleteSkill, getSkillDetail } from '../../services/skill-admin.js';
import { DeletedResponse } from '../schemas/agents-admin.js';
import { API_KEY_SECURITY, COMMON_ERRORS, errorResponses } from '../schemas/common.js';
import { SkillDetailResponse } from '../schemas/skills.js';
import type { TypedApp } from '../typed-app.js';

const SkillParams = Type.Object({ skillId: Type.String({ minLength: 1, maxLength: 200 }) });

/** Skill read and delete (management.md). */
export async function skillAdminRoutes(app: TypedApp, deps: AppDeps): Promise<void> {
  app.get(
    '/skills/:skillId',
    {
      schema: {
        summary: 'Get a skill',
        operationId: 'getSkill',
        description:
          'The skill with its stored files. Visible as in the skill list: members see shared skills and their own private ones; owners and admins every skill of the workspace. Any other skill → 404.',
        tags: ['skills'],
        security: API_KEY_SECURITY,
        params: SkillParams,
        response: { 200: SkillDetailResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => ({
      data: { skill: await getSkillDetail(deps, request.principal, request.params.skillId) },
    }),
  );

  app.delete(
    '/skills/:skillId',
    {
      schema: {
        summary: 'Delete a skill',
        operationId: 'deleteSkill',
        description:
          'Removes the skill and its stored files. An owner or admin key; a member key → 401, also for a skill it uploaded (it may replace that one by uploading again).',
        tags: ['skills'],
        security: API_KEY_SECURITY,
        params: SkillParams,
        response: { 200: DeletedResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => {
      await deleteSkill(deps, request.principal, request.params.skillId, request.log);
      return { data: { deleted: true as const } };
    },
  );
}
