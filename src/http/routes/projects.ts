import type { AppDeps } from '../../deps.js';
import { accessRequestWorkspace } from '../../services/access.js';
import { createProject, listProjects, projectName } from '../../services/projects.js';
import { sendJsonBody } from '../json-reply.js';
import { requestedWorkspaceId } from '../plugins/auth.js';
import { API_KEY_SECURITY, COMMON_ERRORS, errorResponses, WorkspaceHeader } from '../schemas/common.js';
import {
  CreateProjectBody,
  ProjectListQuery,
  ProjectListResponse,
  ProjectResponse,
} from '../schemas/projects.js';
import type { TypedApp } from '../typed-app.js';

export async function projectRoutes(app: TypedApp, deps: AppDeps): Promise<void> {
  app.post(
    '/projects',
    {
      schema: {
        summary: 'Create a project',
        operationId: 'createProject',
        description:
          'Any key of the workspace (an organization key names it in `x-workspace-id`). `name` is trimmed, then 1–200 characters; the other fields are optional, with defaults `""` (`description`, `instructions`), `#64748B` (`color`) and `folder` (`icon`). The project is managed by the API (`managedBy: "api"`).',
        tags: ['projects'],
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        body: CreateProjectBody,
        response: { 201: ProjectResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request, reply) => {
      const name = projectName(request.body.name);
      const access = await accessRequestWorkspace(deps.db, request.principal, requestedWorkspaceId(request));
      const project = await createProject(deps.db, deps.clock, access, { ...request.body, name });
      return reply.code(201).send({ data: { project } });
    },
  );

  app.get(
    '/projects',
    {
      schema: {
        summary: 'List projects',
        operationId: 'listProjects',
        description:
          'Non-archived projects of the workspace (`archived=true`: the archived ones), most recently updated first.',
        tags: ['projects'],
        security: API_KEY_SECURITY,
        headers: WorkspaceHeader,
        querystring: ProjectListQuery,
        response: { 200: ProjectListResponse, ...errorResponses(...COMMON_ERRORS) },
      },
    },
    async (request, reply) => {
      const access = await accessRequestWorkspace(deps.db, request.principal, requestedWorkspaceId(request));
      return sendJsonBody(reply, await listProjects(deps.db, access, request.query.archived ?? false));
    },
  );
}
