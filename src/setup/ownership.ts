import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import type { SetupFile } from './validate.js';

type Executor = Kysely<Database> | Transaction<Database>;

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
 * Every agent, project and key the file declares that exists already and is managed by the
 * API, matched as `apply` matches them (by id, else by name in its scope). Read-only: it runs
 * before anything is written. A project from before ownership was recorded (null) is not
 * claimed by anyone, so the file takes it without --adopt.
 */
export async function findApiManagedObjects(db: Executor, setup: SetupFile): Promise<string[]> {
  const found: string[] = [];
  for (const org of setup.organizations ?? []) {
    const orgRow = await (
      org.id
        ? db.selectFrom('organizations').select('id').where('id', '=', org.id)
        : db.selectFrom('organizations').select('id').where('name', '=', org.name)
    ).executeTakeFirst();
    if (!orgRow) continue;
    for (const key of org.apiKeys ?? []) {
      const row = await (
        key.id
          ? db.selectFrom('api_keys').select(['id', 'managed_by']).where('id', '=', key.id)
          : db
              .selectFrom('api_keys')
              .select(['id', 'managed_by'])
              .where('kind', '=', 'organization')
              .where('organization_id', '=', orgRow.id)
              .where('name', '=', key.name)
      ).executeTakeFirst();
      if (row?.managed_by === 'api') found.push(`organization key "${key.name}" (${row.id})`);
    }
    for (const workspace of org.workspaces ?? []) {
      const wsRow = await (
        workspace.id
          ? db.selectFrom('workspaces').select(['id', 'name']).where('id', '=', workspace.id)
          : db
              .selectFrom('workspaces')
              .select(['id', 'name'])
              .where('organization_id', '=', orgRow.id)
              .where('name', '=', workspace.name)
      ).executeTakeFirst();
      if (!wsRow) continue;
      const where = `in workspace ${wsRow.name} (${wsRow.id})`;
      for (const agent of workspace.agents ?? []) {
        const row = await (
          agent.id
            ? db.selectFrom('agents').select(['id', 'managed_by']).where('id', '=', agent.id)
            : db
                .selectFrom('agents')
                .select(['id', 'managed_by'])
                .where('workspace_id', '=', wsRow.id)
                .where('title', '=', agent.title)
        ).executeTakeFirst();
        if (row?.managed_by === 'api') found.push(`agent "${agent.title}" (${row.id}) ${where}`);
      }
      for (const project of workspace.projects ?? []) {
        const row = await (
          project.id
            ? db.selectFrom('projects').select(['id', 'managed_by']).where('id', '=', project.id)
            : db
                .selectFrom('projects')
                .select(['id', 'managed_by'])
                .where('workspace_id', '=', wsRow.id)
                .where('name', '=', project.name)
        ).executeTakeFirst();
        if (row?.managed_by === 'api') found.push(`project "${project.name}" (${row.id}) ${where}`);
      }
      for (const key of workspace.apiKeys ?? []) {
        const row = await (
          key.id
            ? db.selectFrom('api_keys').select(['id', 'managed_by']).where('id', '=', key.id)
            : db
                .selectFrom('api_keys')
                .select(['id', 'managed_by'])
                .where('kind', '=', 'workspace')
                .where('workspace_id', '=', wsRow.id)
                .where('name', '=', key.name)
        ).executeTakeFirst();
        if (row?.managed_by === 'api') found.push(`workspace key "${key.name}" (${row.id}) ${where}`);
      }
    }
  }
  return found;
}
