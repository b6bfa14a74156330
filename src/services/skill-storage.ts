/**
 * Where a skill's files are stored (docs/skills.md, "Replace"). Every file of a skill is under
 * its folder `skills/{workspaceId}/{skillId}/`, the `storagePath` the API shows (decisions.md),
 * whatever version it is at. The skill's row names the folder of its current version
 * (`storage_path`): that folder itself for a created skill, or, once replaced, the version folder
 * its last replace wrote inside it, `skills/{workspaceId}/{skillId}/.atrium-version-{generation}/`.
 * That name is reserved: no uploaded file's path may begin with it (reservedPathProblem).
 */

/** The first segment of a version folder's name; reserved in skills' own file paths. */
export const SKILL_VERSION_FOLDER_PREFIX = '.atrium-version-';

/** A skill's folder, `skills/{workspaceId}/{skillId}/`: its `storagePath` in the API, always. */
export const skillStoragePath = (workspaceId: string, skillId: string) => `skills/${workspaceId}/${skillId}/`;

/**
 * The folder one replace writes a skill's new version into, inside the skill's folder:
 * `skills/{workspaceId}/{skillId}/.atrium-version-{generation}/`, a new generation for every
 * replace, so that no two replaces (nor a replace and the version it replaces) ever write into
 * one folder.
 */
export const skillVersionPath = (workspaceId: string, skillId: string, generation: string) =>
  `${skillStoragePath(workspaceId, skillId)}${SKILL_VERSION_FOLDER_PREFIX}${generation}/`;

/** Whether a path relative to a skill's folder lies in a version folder (its first segment is one). */
export const isInVersionFolder = (relativePath: string) =>
  relativePath.startsWith(SKILL_VERSION_FOLDER_PREFIX);

/** Why a skill's file path may not be stored (its first segment is a version folder's), or null. */
export function reservedPathProblem(relativePath: string): string | null {
  if (!isInVersionFolder(relativePath)) return null;
  const first = relativePath.split('/')[0]!;
  return `${first}: a first folder (or file) name beginning with "${SKILL_VERSION_FOLDER_PREFIX}" is reserved for Atrium's storage of skill versions`;
}
