import type { Db } from '../db/database.js';
import { insertProject, listProjectsJson, type ProjectRow } from '../db/repositories/projects.js';
import { jsonDataBody, jsonObjectText } from '../db/json-page.js';
import { listingCache } from '../db/listing-cache.js';
import { errors } from '../errors.js';
import { type Clock, isoNow, newId } from '../ids.js';
import { MAX_PROJECT_NAME_LENGTH } from '../limits.js';
import { matchesPattern, PATTERNS } from '../http/schemas/patterns.js';
import { NO_VISIBLE_CHARACTER, showsCharacter } from '../text.js';
import type { WorkspaceAccess } from './access.js';

export const PROJECT_DEFAULTS = {
  description: '',
  instructions: '',
  color: '#64748B',
  icon: 'folder',
} as const;

/**
 * A project name as stored: trimmed, 1–MAX_PROJECT_NAME_LENGTH characters, one of which shows,
 * on one line (400 otherwise): a name of zero-width spaces or blank fillers is an empty line in
 * every list, and a tab or ESC breaks the list or log line that shows it, as it would a chat or
 * agent title. `stored` is the name a PATCH changes: sent back as it is, a name stored before
 * the one-line rule is kept (a client's read-modify-write is not refused for it).
 */
export function projectName(raw: string, stored?: string): string {
  const name = raw.trim();
  // Characters (code points), as JSON Schema's maxLength counts every other bound of the API.
  const length = [...name].length;
  const rule =
    length === 0 || length > MAX_PROJECT_NAME_LENGTH
      ? `must be 1–${MAX_PROJECT_NAME_LENGTH} characters after trimming`
      : !showsCharacter(name)
        ? NO_VISIBLE_CHARACTER
        : name === stored || matchesPattern('oneLineName', name)
          ? null
          : PATTERNS.oneLineName.message;
  if (rule) throw errors.badRequest(`body.name ${rule}`, [{ path: 'body.name', message: rule }]);
  return name;
}

export interface NewProjectInput {
  name: string;
  description?: string;
  instructions?: string;
  color?: string;
  icon?: string;
}

/** The public form of a project; instructions and memory stay inside (spec §2). */
export function projectView(
  project: Omit<ProjectRow, 'instructions' | 'memory' | 'workspace_id' | 'managed_by'>,
) {
  return {
    id: project.id,
    name: project.name,
    description: project.description,
    color: project.color,
    icon: project.icon,
    archived: project.archived === 1,
    createdAt: project.created_at,
    updatedAt: project.updated_at,
  };
}

export async function createProject(db: Db, clock: Clock, access: WorkspaceAccess, input: NewProjectInput) {
  const now = isoNow(clock);
  const project: ProjectRow = {
    id: newId('prj'),
    workspace_id: access.workspaceId,
    name: input.name.trim(),
    description: input.description ?? PROJECT_DEFAULTS.description,
    instructions: input.instructions ?? PROJECT_DEFAULTS.instructions,
    color: input.color ?? PROJECT_DEFAULTS.color,
    icon: input.icon ?? PROJECT_DEFAULTS.icon,
    memory: '',
    archived: 0,
    created_at: now,
    updated_at: now,
    managed_by: 'api',
  };
  await insertProject(db, project);
  return projectView(project);
}

/**
 * The listing's response body (its UTF-8 bytes), its `data` built by the database (each project as
 * `projectView`); kept while no project changes (src/db/listing-cache.ts).
 */
export async function listProjects(db: Db, access: WorkspaceAccess, archived = false): Promise<Buffer> {
  return projectListings(
    db,
    JSON.stringify([access.workspaceId, archived]),
    async () =>
      jsonDataBody(jsonObjectText({ projects: await listProjectsJson(db, access.workspaceId, archived) })),
    access.principal.dataVersion,
  );
}

const projectListings = listingCache(['projects']);
