import { retryOnConflict } from '../conflict-retry.js';
import { type Db, dialectOf } from '../database.js';
import { rowCache } from '../row-cache.js';

export function findWorkspace(db: Db, workspaceId: string) {
  return db.selectFrom('workspaces').selectAll().where('id', '=', workspaceId).executeTakeFirst();
}

/**
 * Locks the workspace's row until the transaction ends: what makes "is this agent title (key
 * name) free?" and the write that takes it one step, so that of two requests taking the same
 * name the second waits and then sees the first's row (409). PostgreSQL: a row lock that only
 * other lockers wait for (`FOR NO KEY UPDATE`: rows that reference the workspace are still
 * written meanwhile) and, being a read, not a change the caches of every process hear about.
 * SQLite: a no-op update, which takes the database's write lock at once, so another process's
 * writer waits (busy timeout) rather than failing when it writes after its read. False when the
 * workspace does not exist.
 */
export function lockWorkspace(trx: Db, workspaceId: string): Promise<boolean> {
  return lockTenantRow(trx, 'workspaces', workspaceId);
}

async function lockTenantRow(trx: Db, table: 'workspaces' | 'organizations', id: string) {
  if (dialectOf(trx) === 'postgres') {
    const row = await trx
      .selectFrom(table)
      .select('id')
      .where('id', '=', id)
      .forNoKeyUpdate()
      .executeTakeFirst();
    return row !== undefined;
  }
  const result = await trx
    .updateTable(table)
    .set((eb) => ({ updated_at: eb.ref('updated_at') }))
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * Runs `work` in one transaction that first takes the workspace's lock (lockWorkspace), run
 * again should PostgreSQL end it in a deadlock (nothing of it was kept).
 */
export function withWorkspaceLocked<T>(
  db: Db,
  workspaceId: string,
  work: (trx: Db) => Promise<T>,
): Promise<T> {
  return withLocked(db, (trx) => lockWorkspace(trx, workspaceId), work);
}

/**
 * withWorkspaceLocked for an organization: its row, locked as lockWorkspace locks a workspace's,
 * makes "is this organization key name free?" and the insert one step.
 */
export function withOrganizationLocked<T>(
  db: Db,
  organizationId: string,
  work: (trx: Db) => Promise<T>,
): Promise<T> {
  return withLocked(db, (trx) => lockTenantRow(trx, 'organizations', organizationId), work);
}

function withLocked<T>(db: Db, lock: (trx: Db) => Promise<boolean>, work: (trx: Db) => Promise<T>) {
  return retryOnConflict(() =>
    db.transaction().execute(async (trx) => {
      await lock(trx);
      return work(trx);
    }),
  );
}

/**
 * Locks every organization, then every workspace, each in id order, until the transaction ends:
 * what `atrium apply` takes first, before it writes anything (PostgreSQL; SQLite's one writer at
 * a time is that lock). Keys made by name elsewhere hold one of these rows while they check the
 * name (an organization's for `atrium keys create --organization`, a workspace's for the rest),
 * so they wait for the file's keys, or the file for them. Taken later, after it had written a
 * user's row, it deadlocked with a key being made for that user (which holds the workspace's
 * lock and waits on the user's row); and its check of API-managed objects could miss an agent
 * the API made meanwhile.
 */
export async function lockAllTenants(trx: Db): Promise<void> {
  if (dialectOf(trx) !== 'postgres') return;
  await trx.selectFrom('organizations').select('id').orderBy('id').forNoKeyUpdate().execute();
  await trx.selectFrom('workspaces').select('id').orderBy('id').forNoKeyUpdate().execute();
}

/** A workspace with the given user's role in it (null when not a member), in one query. */
export function findWorkspaceWithRole(db: Db, workspaceId: string, userId: string) {
  return db
    .selectFrom('workspaces')
    .leftJoin('workspace_members', (join) =>
      join
        .onRef('workspace_members.workspace_id', '=', 'workspaces.id')
        .on('workspace_members.user_id', '=', userId),
    )
    .select([
      'workspaces.id',
      'workspaces.organization_id',
      'workspaces.default_model',
      'workspaces.rate_limit_per_minute',
      'workspace_members.role',
    ])
    .where('workspaces.id', '=', workspaceId)
    .executeTakeFirst();
}

/** The roles of each of `userIds` in the workspaces of an organization, one row per membership. */
export function findOrganizationRoles(db: Db, organizationId: string, userIds: string[]) {
  return db
    .selectFrom('workspace_members')
    .innerJoin('workspaces', 'workspaces.id', 'workspace_members.workspace_id')
    .select(['workspace_members.user_id', 'workspace_members.workspace_id', 'workspace_members.role'])
    .where('workspaces.organization_id', '=', organizationId)
    .where('workspace_members.user_id', 'in', userIds)
    .execute();
}

export function findUser(db: Db, userId: string) {
  return db.selectFrom('users').selectAll().where('id', '=', userId).executeTakeFirst();
}

const users = rowCache<NonNullable<Awaited<ReturnType<typeof findUser>>>>(['users']);

/**
 * `findUser` from memory while the users did not change (src/db/row-cache.ts; `version`: the
 * request's `Principal.dataVersion`). The object is shared: not to be changed.
 */
export function findUserCached(db: Db, userId: string, version?: number) {
  return users(db, userId, () => findUser(db, userId), version);
}
