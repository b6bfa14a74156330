import type { Db } from '../db/database.js';
import { ApiError, errors } from '../errors.js';
import { deletePrefixOrLog, type ObjectStore, type StoreLog } from '../storage/object-store.js';
import { accessWorkspaceIfAllowed, type Principal, requireManager } from './access.js';
import { isInVersionFolder, skillStoragePath } from './skill-storage.js';
import { maySeeSkill } from './skills.js';

export interface SkillAdminDeps {
  db: Db;
  store: ObjectStore;
}

function findSkill(db: Db, skillId: string) {
  return db.selectFrom('skills').selectAll().where('id', '=', skillId).executeTakeFirst();
}

/**
 * A skill the caller may see, by the list's rule (maySeeSkill): shared ones and its user's own
 * private ones, and for owners and admins every skill of the workspace. Anything else is
 * missing (404).
 */
async function visibleSkill(deps: SkillAdminDeps, principal: Principal, skillId: string) {
  const skill = await findSkill(deps.db, skillId);
  const access = skill ? await accessWorkspaceIfAllowed(deps.db, principal, skill.workspace_id) : null;
  if (!skill || !access || !maySeeSkill(access, skill)) throw errors.notFound('Skill');
  return { skill, access };
}

/**
 * The files of the version in `current`, the folder the skill's row names. When that is the
 * skill's folder itself (never replaced), the version folders inside it are not its files: a
 * replace's still being written (or one that crashed), which no reader is shown.
 */
async function skillFiles(store: ObjectStore, current: string, root: string) {
  const files: Array<{ path: string; sizeBytes: number }> = [];
  for await (const object of store.list(current)) {
    const path = object.key.slice(current.length);
    if (current === root && isInVersionFolder(path)) continue;
    files.push({ path, sizeBytes: object.size });
  }
  return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** Reads of a skill that a replace overtook, before the read gives up (503). */
const READ_ATTEMPTS = 5;

/**
 * The skill with its files, all of one version. A replace writes a new version folder inside the
 * skill's folder, then switches the row to it and removes the previous version, so a listing of
 * the folder the row named may have run while that version was being removed: the row is read
 * again after the listing, and a read whose folder is no longer the row's starts over with the
 * new row. Its `storagePath` is the skill's folder, whatever version it is at.
 */
export async function getSkillDetail(deps: SkillAdminDeps, principal: Principal, skillId: string) {
  for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
    const { skill } = await visibleSkill(deps, principal, skillId);
    const root = skillStoragePath(skill.workspace_id, skill.id);
    const files = await skillFiles(deps.store, skill.storage_path, root);
    const now = await deps.db
      .selectFrom('skills')
      .select('storage_path')
      .where('id', '=', skill.id)
      .executeTakeFirst();
    if (!now) throw errors.notFound('Skill');
    if (now.storage_path !== skill.storage_path) continue;
    return {
      id: skill.id,
      name: skill.name,
      description: skill.description,
      visibility: skill.visibility,
      ownerUserId: skill.owner_user_id,
      storagePath: root,
      // The same fields as the skill's list item, which the database builds from these columns.
      metadata: JSON.parse(skill.metadata) as Record<string, unknown>,
      files,
      createdAt: skill.created_at,
      updatedAt: skill.updated_at,
    };
  }
  throw new ApiError(
    'service_unavailable',
    'The skill was replaced again and again while it was read; try again shortly',
    { retryAfterSeconds: 1 },
  );
}

/**
 * Deletes a skill: its uploader or an owner or admin. The row goes first, so the skill is gone
 * for every reader at once; should removing the objects fail, they are objects without a row,
 * which the startup sweep (sweepOrphanSkillObjects) removes. That failure is logged, not
 * answered: the skill is deleted, and a client told to try again would get 404.
 */
export async function deleteSkill(
  deps: SkillAdminDeps,
  principal: Principal,
  skillId: string,
  log: StoreLog,
) {
  const { skill, access } = await visibleSkill(deps, principal, skillId);
  // management.md: write routes need an owner or admin key, and this route's row makes no
  // exception, so not even a member's own upload (a member replaces it by uploading again).
  requireManager(access);
  const deleted = await deps.db.deleteFrom('skills').where('id', '=', skill.id).executeTakeFirst();
  if (Number(deleted.numDeletedRows) === 0) return;
  // The skill's whole folder: every version of it (the current one, a previous one not yet
  // removed, a replace's still being written) is inside.
  const message = `could not remove the files of deleted skill ${skill.id}; the leftovers sweep removes them`;
  await deletePrefixOrLog(deps.store, skillStoragePath(skill.workspace_id, skill.id), log, message);
}
