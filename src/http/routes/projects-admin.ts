import type { AppDeps } from '../../deps.js';
import { accessRequestWorkspace } from '../../services/access.js';
import { deleteProject, getProjectDetail, patchProject } from '../../services/project-admin.js';
import { requestedWorkspaceId } from '../plugins/auth.js';
import { DeletedResponse } from '../schemas/agents-admin.js';
import {
  API_KEY_SECURITY,
  COMMON_ERRORS,
  errorResponses,
  PATCH_BODY_TYPES,
  WorkspaceHeader,
} from '../schemas/common.js';
import { PatchProjectBody, ProjectDetailResponse, ProjectParams } from '../schemas/projects.js';
import { registerMergePatchRoutes } from '../json-body.js';
import type { TypedApp } from '../typed-app.js';

/** Project read (with instructions and memory), update and delete (management.md). */
export async function projectAdminRoutes(app: TypedApp, deps: AppDeps): Promise<void> {
  app.get(
    '/projects/:projectId',
    {
      schema: {
        summary: 'Get a project',
        operationId: 'getProject',
        description: 'The project with its instructions, memory and managedBy.',
        tags: ['projects'],
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: ProjectParams,
        response: { 200: ProjectDetailResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request) => {
      const access = await accessRequestWorkspace(deps.db, request.principal, requestedWorkspaceId(request));
      return { data: { project: await getProjectDetail(deps.db, access, request.params.projectId) } };
    },
  );

  await registerMergePatchRoutes(app, (scope) => {
    scope.patch(
      '/projects/:projectId',
      {
        schema: {
          summary: 'Update a project',
          operationId: 'updateProject',
          description:
            'Any key of the workspace. `archived: true` archives, `false` restores. A project of the setup file → 409 `managed_by_setup`.',
          tags: ['projects'],
          security: API_KEY_SECURITY,
          headers: WorkspaceHeader,
          params: ProjectParams,
          consumes: PATCH_BODY_TYPES,
          body: PatchProjectBody,
          response: { 200: ProjectDetailResponse, ...errorResponses(...COMMON_ERRORS, 409) },
        },
      },
      async (request) => {
        const access = await accessRequestWorkspace(
          deps.db,
          request.principal,
          requestedWorkspaceId(request),
        );
        const project = await patchProject(deps, access, request.params.projectId, request.body);
        return { data: { project } };
      },
    );
  });

  app.delete(
    '/projects/:projectId',
    {
      schema: {
        summary: 'Delete a project',
        operationId: 'deleteProject',
        description:
          'Deletes the project, its files (objects and records); its chats stay with `projectId` null. An owner or admin only (a member → 401 `unauthorized`). A project of the setup file → 409 `managed_by_setup`.',
        tags: ['projects'],
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        params: ProjectParams,
        response: { 200: DeletedResponse, ...errorResponses(...COMMON_ERRORS, 409) },
      },
    },
    async (request) => {
      const access = await accessRequestWorkspace(deps.db, request.principal, requestedWorkspaceId(request));
      await deleteProject(deps, access, request.params.projectId);
      return { data: { deleted: true as const } };
    },
  );
}
