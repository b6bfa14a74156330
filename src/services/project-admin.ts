import type { Db } from '../db/database.js';
import {
  deleteProjectRows,
  findExistingProjectIds,
  findProject,
  type ProjectRow,
  updateProject,
} from '../db/repositories/projects.js';
import { errors } from '../errors.js';
import { type Clock, isoNow } from '../ids.js';
import { deletePrefixOrLog, type ObjectStore, type StoreLog } from '../storage/object-store.js';
import { requireManager, type WorkspaceAccess } from './access.js';
import { projectStoragePrefix } from './project-files.js';
import { PROJECT_DEFAULTS, projectName, projectView } from './projects.js';

export interface ProjectAdminDeps {
  db: Db;
  clock: Clock;
  store: ObjectStore;
}

/** Absent fields stay; `null` puts a field back to its default (a merge patch's removal). */
export interface ProjectPatch {
  /** As sent: patchProject trims and checks it (projectName). */
  name?: string;
  description?: string | null;
  instructions?: string | null;
  memory?: string | null;
  color?: string | null;
  icon?: string | null;
  archived?: boolean;
}

/** The project with what the listing leaves out; a project from before ownership is the API's. */
export function projectDetailView(row: ProjectRow) {
  return {
    ...projectView(row),
    instructions: row.instructions,
    memory: row.memory,
    managedBy: row.managed_by ?? ('api' as const),
  };
}

async function requireProject(db: Db, access: WorkspaceAccess, projectId: string) {
  const row = await findProject(db, access.workspaceId, projectId);
  if (!row) throw errors.notFound('Project');
  return row;
}

async function writableProject(db: Db, access: WorkspaceAccess, projectId: string) {
  const row = await requireProject(db, access, projectId);
  if (row.managed_by === 'setup') throw errors.managedBySetup('This project');
  return row;
}

export async function getProjectDetail(db: Db, access: WorkspaceAccess, projectId: string) {
  return projectDetailView(await requireProject(db, access, projectId));
}

/** Any key of the workspace may update a project, as any may create one (management.md). */
export async function patchProject(
  deps: ProjectAdminDeps,
  access: WorkspaceAccess,
  projectId: string,
  patch: ProjectPatch,
) {
  const row = await writableProject(deps.db, access, projectId);
  const changes: Partial<ProjectRow> = {};
  // The name's rules here, where the stored name is known (projectName keeps it when sent back).
  if (patch.name !== undefined) changes.name = projectName(patch.name, row.name);
  if (patch.description !== undefined)
    changes.description = patch.description ?? PROJECT_DEFAULTS.description;
  if (patch.instructions !== undefined)
    changes.instructions = patch.instructions ?? PROJECT_DEFAULTS.instructions;
  if (patch.memory !== undefined) changes.memory = patch.memory ?? '';
  if (patch.color !== undefined) changes.color = patch.color ?? PROJECT_DEFAULTS.color;
  if (patch.icon !== undefined) changes.icon = patch.icon ?? PROJECT_DEFAULTS.icon;
  if (patch.archived !== undefined) changes.archived = patch.archived ? 1 : 0;
  changes.updated_at = isoNow(deps.clock);
  await updateProject(deps.db, row.id, changes);
  return projectDetailView({ ...row, ...changes });
}

/**
 * Deletes the project's objects, then its rows. In that order a failure leaves at worst records
 * without objects (which the next sync removes), never objects nobody can reach or delete. An
 * owner or admin only (management.md: only PATCH is open to any key, as creating is).
 */
export async function deleteProject(deps: ProjectAdminDeps, access: WorkspaceAccess, projectId: string) {
  // Who may first (401 for a member), then whether the API may (409 for the setup file's).
  requireManager(access);
  const row = await writableProject(deps.db, access, projectId);
  await deps.store.deletePrefix(projectStoragePrefix(access.workspaceId, row.id));
  await deleteProjectRows(deps.db, access.workspaceId, row.id);
}

/**
 * Removes the objects of projects that no longer exist, once nothing was written under them for
 * `graceMs`: an upload URL handed out before its project was deleted stays valid for its
 * lifetime, and an upload through it (straight to S3, or one under way during the delete) lands
 * under a prefix no sync will ever look at. Only folders without a project are listed in full.
 * A folder storage fails to empty is logged, not counted, and left to the next sweep.
 */
export async function sweepOrphanProjectObjects(
  db: Db,
  store: ObjectStore,
  now: Date,
  graceMs: number,
  log: StoreLog,
): Promise<number> {
  const cutoff = now.getTime() - graceMs;
  let removed = 0;
  for await (const workspaceId of store.listFolders('projects/')) {
    const projectIds: string[] = [];
    for await (const projectId of store.listFolders(`projects/${workspaceId}/`)) projectIds.push(projectId);
    const existing = await findExistingProjectIds(db, workspaceId, projectIds);
    for (const projectId of projectIds) {
      if (existing.has(projectId)) continue;
      const prefix = projectStoragePrefix(workspaceId, projectId);
      let newestWrite = 0;
      for await (const object of store.list(prefix)) {
        newestWrite = Math.max(newestWrite, object.lastModified.getTime());
      }
      if (newestWrite >= cutoff) continue;
      // One folder S3 refuses (a key under legal hold, a policy) must not stop the others.
      const message = 'could not remove the objects of a deleted project; the next sweep tries again';
      if (await deletePrefixOrLog(store, prefix, log, message)) removed++;
    }
  }
  return removed;
}
