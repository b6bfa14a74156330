import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import multipart from '@fastify/multipart';
import Ajv from 'ajv';
import type { AppDeps } from '../../deps.js';
import { accessWorkspaceInPath } from '../../services/access.js';
import { clampLimit } from '../../services/paging.js';
import {
  assertMayUploadSkills,
  type BulkUploadResult as BulkUploadData,
  bulkUploadSkills,
  listSkills,
  SKILL_PAGE,
  SKILL_UPLOAD_LIMITS,
} from '../../services/skills.js';
import { WorkspaceParams } from '../schemas/agents.js';
import { API_KEY_SECURITY, COMMON_ERRORS, errorResponses } from '../schemas/common.js';
import { BulkUploadForm, BulkUploadResult, SkillListQuery, SkillListResponse } from '../schemas/skills.js';
import { sendJsonBody } from '../json-reply.js';
import { keepSpoolFresh, skillUploadRoot, spoolSkillUpload } from '../skill-upload-spool.js';
import { type TypedApp, typed } from '../typed-app.js';

/**
 * The multipart body is read as a stream by the handler, so the body schema only documents the
 * form; params are still validated (with coercion, as everywhere else).
 */
function multipartRouteValidator() {
  const ajv = new Ajv.default({ coerceTypes: 'array', useDefaults: true, strict: false });
  return ({ schema, httpPart }: { schema: object; httpPart?: string }) =>
    httpPart === 'body' ? () => true : ajv.compile(schema);
}

export async function skillRoutes(app: TypedApp, deps: AppDeps): Promise<void> {
  app.get(
    '/workspace/:workspaceId/skills',
    {
      schema: {
        summary: 'List skills',
        operationId: 'listSkills',
        description:
          'Skills of the workspace the caller may see: for a member, shared ones and its own private ones; for an owner or admin, every skill (the skills `GET /v1/skills/{skillId}` answers). By name (case-insensitive), then id. Case-insensitive: each name lower-cased by Unicode’s default rules, then compared code point by code point, the same on every database: `éa` comes before `Éb`, and both after every name that starts with an ASCII letter.',
        tags: ['skills'],
        security: API_KEY_SECURITY,
        params: WorkspaceParams,
        querystring: SkillListQuery,
        response: { 200: SkillListResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request, reply) => {
      const access = await accessWorkspaceInPath(deps.db, request.principal, request.params.workspaceId);
      const limit = clampLimit(request.query.limit, SKILL_PAGE.defaultLimit, SKILL_PAGE.maxLimit);
      return sendJsonBody(
        reply,
        await listSkills(deps.db, access, { limit, offset: request.query.offset ?? 0 }),
      );
    },
  );

  // Multipart parsing is registered for this route only, so other routes keep their content types.
  await app.register(async (scope) => {
    await scope.register(multipart, { throwFileSizeLimit: true });
    // What a crashed process left here is swept by the server (src/leftovers.ts).
    const uploadRoot = skillUploadRoot(deps.config.dataDir);

    typed(scope).post(
      '/workspace/:workspaceId/skills/bulk-upload',
      {
        validatorCompiler: multipartRouteValidator(),
        schema: {
          summary: 'Bulk upload skills',
          operationId: 'bulkUploadSkills',
          description:
            'Zip archives of skill directories (each with a SKILL.md) and standalone .md files. 200 when every skill was created or skipped, 207 (same body) when some failed. At most 32 MB of files, 200 skills and 10,000 archive entries per request, 1,000 files per skill; archives are checked for unsafe paths, links, encryption and decompressed size before anything is stored.',
          tags: ['skills'],
          security: API_KEY_SECURITY,
          consumes: ['multipart/form-data'],
          params: WorkspaceParams,
          body: BulkUploadForm,
          response: {
            200: BulkUploadResult,
            207: { ...BulkUploadResult, description: 'Some skills failed: see `errors`' },
            ...errorResponses(...COMMON_ERRORS),
          },
        },
      },
      async (request, reply) => {
        const access = await accessWorkspaceInPath(deps.db, request.principal, request.params.workspaceId);
        assertMayUploadSkills(access);
        await mkdir(uploadRoot, { recursive: true });
        const dir = await mkdtemp(path.join(uploadRoot, 'req-'));
        const inUse = keepSpoolFresh(dir);
        let data: BulkUploadData;
        try {
          const upload = await spoolSkillUpload(
            request,
            dir,
            SKILL_UPLOAD_LIMITS.maxUploadBytes,
            (visibility) => assertMayUploadSkills(access, visibility),
          );
          data = await bulkUploadSkills({ db: deps.db, store: deps.store, clock: deps.clock }, access, {
            parts: upload.parts,
            visibility: upload.visibility ?? 'private',
            mode: upload.mode ?? 'create',
          });
        } finally {
          await inUse.stop();
          // Before answering, so that no spooled part outlives its request. A failure here must
          // not replace the request's own outcome; the periodic sweep gets what is left.
          await rm(dir, { recursive: true, force: true, maxRetries: 3 }).catch((error: unknown) =>
            request.log.warn({ err: error }, 'could not remove a skill upload directory'),
          );
        }
        return reply.code(data.errors.length > 0 ? 207 : 200).send({ data });
      },
    );
  });
}
