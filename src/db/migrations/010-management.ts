import { type Kysely, sql } from 'kysely';

/**
 * Management over the API (management.md): who manages each agent, project and key; session
 * tokens (stored as keys of kind `session`, with the agents they are limited to); the user a
 * run was made for; and the indexes the usage report and run listing read by.
 *
 * Existing rows: agents and keys could only come from the setup file or the operator's CLI, so
 * they are `setup`. A project may have come from either, which the database cannot tell: it is
 * left unclaimed (null), which the API treats as its own and the next `atrium apply` that
 * declares it claims without `--adopt`, so an upgrade never breaks a working deploy.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('agents')
    .addColumn('managed_by', 'text', (c) => c.notNull().defaultTo('setup'))
    .execute();
  await db.schema.alterTable('projects').addColumn('managed_by', 'text').execute();
  await db.schema
    .alterTable('api_keys')
    .addColumn('managed_by', 'text', (c) => c.notNull().defaultTo('setup'))
    .execute();
  await db.schema.alterTable('api_keys').addColumn('agent_ids', 'text').execute();
  await db.schema.alterTable('agent_runs').addColumn('user_id', 'text').execute();

  await db.schema
    .createIndex('messages_workspace_created_idx')
    .on('messages')
    .columns(['workspace_id', 'created_at'])
    .execute();
  await db.schema
    .createIndex('agent_runs_workspace_created_idx')
    .on('agent_runs')
    .columns(['workspace_id', 'created_at'])
    .execute();
  await sql`create index api_keys_workspace_idx on api_keys (workspace_id, kind)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('api_keys_workspace_idx').execute();
  await db.schema.dropIndex('agent_runs_workspace_created_idx').execute();
  await db.schema.dropIndex('messages_workspace_created_idx').execute();
  await db.schema.alterTable('agent_runs').dropColumn('user_id').execute();
  await db.schema.alterTable('api_keys').dropColumn('agent_ids').execute();
  await db.schema.alterTable('api_keys').dropColumn('managed_by').execute();
  await db.schema.alterTable('projects').dropColumn('managed_by').execute();
  await db.schema.alterTable('agents').dropColumn('managed_by').execute();
}
