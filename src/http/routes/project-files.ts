import type { FastifyRequest } from 'fastify';
import type { AppDeps } from '../../deps.js';
import { errors, type ValidationIssue } from '../../errors.js';
import { accessRequestWorkspace } from '../../services/access.js';
import {
  createDownloadUrl,
  createUploadUrl,
  deleteProjectFile,
  listProjectFiles,
  projectFileTree,
  syncProjectFiles,
} from '../../services/project-files.js';
import { requestedWorkspaceId } from '../plugins/auth.js';
import {
  API_KEY_SECURITY,
  COMMON_ERRORS,
  errorResponses,
  MAX_OFFSET,
  WorkspaceHeader,
} from '../schemas/common.js';
import {
  DeleteFileResponse,
  DownloadUrlResponse,
  ListProjectFilesQuery,
  ProjectFileIdParams,
  ProjectFileListResponse,
  ProjectFileParams,
  SyncResponse,
  UploadUrlBody,
  UploadUrlResponse,
} from '../schemas/project-files.js';
import { sendJsonBody } from '../json-reply.js';
import type { TypedApp } from '../typed-app.js';

const TAGS = ['project files'];

export async function projectFileRoutes(app: TypedApp, deps: AppDeps): Promise<void> {
  const workspaceOf = async (request: FastifyRequest) =>
    (await accessRequestWorkspace(deps.db, request.principal, requestedWorkspaceId(request))).workspaceId;

  app.post(
    '/projects/:projectId/files/upload',
    {
      schema: {
        summary: 'Request a file upload URL',
        operationId: 'createFileUploadUrl',
        description:
          'Step 1 of 2. Returns a URL to PUT the bytes to, with the same Content-Type and exactly `sizeBytes` bytes, within 15 minutes. Then call sync.',
        tags: TAGS,
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: ProjectFileParams,
        body: UploadUrlBody,
        response: { 200: UploadUrlResponse, ...errorResponses(...COMMON_ERRORS, 409) },
      },
    },
    async (request) => {
      const workspaceId = await workspaceOf(request);
      const target = await createUploadUrl(deps, workspaceId, request.params.projectId, request.body);
      return { data: target };
    },
  );

  app.post(
    '/projects/:projectId/files/sync',
    {
      schema: {
        summary: 'Sync project files with storage',
        operationId: 'syncProjectFiles',
        description:
          'Step 2 of 2. Registers new uploads (`added`), removes records of deleted objects (`removed`), records changed content (`updated`). Idempotent. 409 `quota_exceeded` when objects in storage would exceed the quota (the others are registered; `details` lists the rest). Objects no upload could have made (an S3 folder marker `docs/`, a path deeper than 10 folders, a name with a backslash) are ignored and take no quota.',
        tags: TAGS,
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: ProjectFileParams,
        response: { 200: SyncResponse, ...errorResponses(...COMMON_ERRORS, 409) },
      },
    },
    async (request) => {
      const workspaceId = await workspaceOf(request);
      return { data: await syncProjectFiles(deps, workspaceId, request.params.projectId) };
    },
  );

  app.get(
    '/projects/:projectId/files',
    {
      schema: {
        summary: 'List project files',
        operationId: 'listProjectFiles',
        description:
          'Flat: newest `updatedAt` first, then id, paged by `limit` (1–100, omitted: all) and `offset`. `tree=true`: `{ data: { tree: [node] } }`, folders first, then files, each by name.',
        tags: TAGS,
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: ProjectFileParams,
        querystring: ListProjectFilesQuery,
        response: { 200: ProjectFileListResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request, reply) => {
      const workspaceId = await workspaceOf(request);
      const { projectId } = request.params;
      if (request.query.tree)
        return { data: { tree: await projectFileTree(deps.db, workspaceId, projectId) } };
      const page = flatListPage(request.query);
      return sendJsonBody(
        reply,
        await listProjectFiles(deps.db, workspaceId, projectId, page, request.principal.dataVersion),
      );
    },
  );

  app.get(
    '/projects/:projectId/files/:fileId/download',
    {
      schema: {
        summary: 'Get a file download URL',
        operationId: 'createFileDownloadUrl',
        description: 'A signed URL valid 4 hours, plus the file name, type and size.',
        tags: TAGS,
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: ProjectFileIdParams,
        response: { 200: DownloadUrlResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => {
      const workspaceId = await workspaceOf(request);
      const { projectId, fileId } = request.params;
      return {
        data: await createDownloadUrl(deps, workspaceId, projectId, fileId),
      };
    },
  );

  app.delete(
    '/projects/:projectId/files/:fileId',
    {
      schema: {
        summary: 'Delete a project file',
        operationId: 'deleteProjectFile',
        description: 'Removes the object and the record. A second delete is 404.',
        tags: TAGS,
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: ProjectFileIdParams,
        response: { 200: DeleteFileResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => {
      const workspaceId = await workspaceOf(request);
      const { projectId, fileId } = request.params;
      return { data: await deleteProjectFile(deps, workspaceId, projectId, fileId) };
    },
  );
}

/** Most files one page of the flat list holds. */
const FILE_PAGE_MAX = 100;

/** The flat list's page, within bounds (the tree ignores `limit` and `offset`, so the schema cannot check them). */
function flatListPage(query: { limit?: number; offset?: number }): { limit?: number; offset: number } {
  const { limit, offset = 0 } = query;
  const issues: ValidationIssue[] = [];
  if (limit !== undefined && (limit < 1 || limit > FILE_PAGE_MAX)) {
    issues.push({ path: 'query.limit', message: `must be from 1 to ${FILE_PAGE_MAX}` });
  }
  if (offset < 0 || offset > MAX_OFFSET) {
    issues.push({ path: 'query.offset', message: `must be from 0 to ${MAX_OFFSET}` });
  }
  const first = issues[0];
  if (first) throw errors.badRequest(`${first.path} ${first.message}`, issues);
  return { limit, offset };
}
