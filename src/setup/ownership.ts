import { type SelectQueryBuilder, type SqlBool, sql } from 'kysely';
import type { Executor } from '../db/database.js';
import type { SetupFile } from './validate.js';

/** `atrium apply` met objects the API manages and was not told to adopt them (management.md). */
export class ApiManagedObjectsError extends Error {
  constructor(readonly objects: string[]) {
    super(
      `The setup file declares ${objects.length} object(s) managed through the API: ${objects.join('; ')}. ` +
        'Nothing was applied. Run again with --adopt to make the file their manager.',
    );
    this.name = 'ApiManagedObjectsError';
  }
}

/**
 * The file would leave two live agents with one title in a workspace (an agent it names by id
 * taking the title of another, such as one made through the API, which keeps titles unique).
 */
export class DuplicateAgentTitlesError extends Error {
  constructor(readonly titles: string[]) {
    super(`The setup file would leave agents sharing a title in a workspace: ${titles.join('; ')}.`);
    this.name = 'DuplicateAgentTitlesError';
  }
}

/**
 * The file names an object that lives in another workspace or organization than the one the file
 * puts it in: by id, or a user by email (unique across organizations). Applying would move it
 * there, and with it another tenant's agent, project, key or user (a copied or mistyped id or
 * email). Refused whatever `--adopt` says.
 */
export class MovedObjectError extends Error {
  constructor(
    readonly object: string,
    /** What the file named it by: `id`, or the column it was found by (a user's `email`). */
    readonly foundBy: string,
  ) {
    super(`The setup file would move ${object}.`);
    this.name = 'MovedObjectError';
  }
}

/**
 * The file gives an object something that names one stored object only, and another has it: a
 * user (given an id) another user's email, or a key another key's plaintext. Inserting it would
 * fail on a unique constraint (a raw constraint error before); `hint` says how to resolve it.
 */
export class TakenIdentityError extends Error {
  constructor(
    message: string,
    readonly hint: string,
  ) {
    super(message);
    this.name = 'TakenIdentityError';
  }
}

/**
 * Live agent titles held by more than one agent of a workspace, as `"title" in wsp_…`, in the
 * workspaces where an agent was written at `writtenAt` (this apply's time).
 */
export async function findDuplicateAgentTitles(db: Executor, writtenAt: string): Promise<string[]> {
  const rows = await db
    .selectFrom('agents')
    .select(['workspace_id', 'title'])
    .where('deleted_at', 'is', null)
    .where(
      'workspace_id',
      'in',
      db.selectFrom('agents').select('workspace_id').where('updated_at', '=', writtenAt),
    )
    .groupBy(['workspace_id', 'title'])
    .having((eb) => eb.fn.countAll(), '>', 1)
    .execute();
  return rows.map((row) => `"${row.title}" in ${row.workspace_id}`);
}

/**
 * Narrows a lookup of agents or keys by name to the rows `apply` may match, best first. The API
 * frees the name of an agent it deleted or a key it revoked or that expired by `now` (a new one
 * may take it), so such a row the API manages is nobody's to match: a file declaring that name
 * creates a new object. A retired row the file manages still matches, before a live one of the
 * API: the file deleted that agent (`deleted: true` stays idempotent), and a key of the file
 * stays as it is on a re-apply (revoked until a new plaintext in the file revives it; expired
 * until the file moves its `expiresAt`).
 */
export function matchableByName<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  table: 'agents' | 'api_keys',
  now: string,
): SelectQueryBuilder<DB, TB, O> {
  const live =
    table === 'agents'
      ? sql<SqlBool>`deleted_at is null`
      : sql<SqlBool>`revoked_at is null and (expires_at is null or expires_at > ${now})`;
  return query
    .where(sql<SqlBool>`(managed_by = 'setup' or ${live})`)
    .orderBy(sql`case when managed_by = 'setup' then 0 else 1 end`)
    .orderBy(sql`case when ${live} then 0 else 1 end`)
    .orderBy(sql`created_at`, 'desc')
    .orderBy(sql`id`, 'desc');
}

/** A stored agent, project or key as far as ownership goes. */
type OwnedRow = { id: string; managed_by: string | null } | undefined;

/**
 * Records the object (`describe`) in `found` when the row the file refers to is managed by the API: looked up by
 * the file's `id` when it gives one, else by `byName` (its name within its scope).
 */
async function noteIfApiManaged(
  found: string[],
  describe: (rowId: string) => string,
  id: string | undefined,
  byId: (id: string) => Promise<OwnedRow>,
  byName: () => Promise<OwnedRow>,
): Promise<void> {
  const row = await (id ? byId(id) : byName());
  if (row?.managed_by === 'api') found.push(describe(row.id));
}

/**
 * Every agent, project and key the file declares that exists already and is managed by the
 * API, matched as `apply` matches them at `now` (by id, else by name in its scope, see
 * matchableByName). Read-only: it runs
 * before anything is written. A project from before ownership was recorded (null) is not
 * claimed by anyone, so the file takes it without --adopt.
 */
export async function findApiManagedObjects(db: Executor, setup: SetupFile, now: string): Promise<string[]> {
  const found: string[] = [];
  const owned = (table: 'agents' | 'projects' | 'api_keys') =>
    db.selectFrom(table).select(['id', 'managed_by']);
  const byId = (table: 'agents' | 'projects' | 'api_keys') => (id: string) =>
    owned(table).where('id', '=', id).executeTakeFirst();
  /** The key of that kind and name in its organization or workspace that a file's key matches. */
  const keyNamed = (kind: 'organization' | 'workspace', name: string) => (scopeId: string) =>
    matchableByName(
      owned('api_keys')
        .where('kind', '=', kind)
        .where(kind === 'organization' ? 'organization_id' : 'workspace_id', '=', scopeId)
        .where('name', '=', name),
      'api_keys',
      now,
    ).executeTakeFirst();
  for (const org of setup.organizations ?? []) {
    const orgRow = await (
      org.id
        ? db.selectFrom('organizations').select('id').where('id', '=', org.id)
        : db.selectFrom('organizations').select('id').where('name', '=', org.name)
    ).executeTakeFirst();
    // In an organization or workspace that does not exist yet nothing matches by name, but an
    // object the file names by id is still that object, wherever it is now.
    const byNameIn =
      (scope: { id: string } | undefined, lookup: (scopeId: string) => Promise<OwnedRow>) => () =>
        scope ? lookup(scope.id) : Promise.resolve(undefined);
    for (const key of org.apiKeys ?? []) {
      await noteIfApiManaged(
        found,
        (rowId) => `organization key "${key.name}" (${rowId})`,
        key.id,
        byId('api_keys'),
        byNameIn(orgRow, keyNamed('organization', key.name)),
      );
    }
    for (const workspace of org.workspaces ?? []) {
      const wsRow =
        workspace.id || orgRow
          ? await (
              workspace.id
                ? db.selectFrom('workspaces').select(['id', 'name']).where('id', '=', workspace.id)
                : db
                    .selectFrom('workspaces')
                    .select(['id', 'name'])
                    .where('organization_id', '=', orgRow!.id)
                    .where('name', '=', workspace.name)
            ).executeTakeFirst()
          : undefined;
      const where = wsRow
        ? `in workspace ${wsRow.name} (${wsRow.id})`
        : `for new workspace ${workspace.name}`;
      for (const agent of workspace.agents ?? []) {
        await noteIfApiManaged(
          found,
          (rowId) => `agent "${agent.title}" (${rowId}) ${where}`,
          agent.id,
          byId('agents'),
          byNameIn(wsRow, (wsId) =>
            matchableByName(
              db
                .selectFrom('agents')
                .select(['id', 'managed_by'])
                .where('workspace_id', '=', wsId)
                .where('title', '=', agent.title),
              'agents',
              now,
            ).executeTakeFirst(),
          ),
        );
      }
      for (const project of workspace.projects ?? []) {
        await noteIfApiManaged(
          found,
          (rowId) => `project "${project.name}" (${rowId}) ${where}`,
          project.id,
          byId('projects'),
          byNameIn(wsRow, (wsId) =>
            db
              .selectFrom('projects')
              .select(['id', 'managed_by'])
              .where('workspace_id', '=', wsId)
              .where('name', '=', project.name)
              .executeTakeFirst(),
          ),
        );
      }
      for (const key of workspace.apiKeys ?? []) {
        await noteIfApiManaged(
          found,
          (rowId) => `workspace key "${key.name}" (${rowId}) ${where}`,
          key.id,
          byId('api_keys'),
          byNameIn(wsRow, keyNamed('workspace', key.name)),
        );
      }
    }
  }
  return found;
}
