import type { Kysely } from 'kysely';

/**
 * `agent_runs.warnings` and `agent_runs.sources`: the tool set-up warnings and the project file
 * passages (`SourceView`s) a run's POST answered, as JSON arrays, so that a run read back
 * (`GET /v1/agents/{id}/runs/{runId}`, the run list) shows what its POST showed, as a reloaded
 * chat shows what the live one did. Null when there were none, and for runs stored before.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('agent_runs').addColumn('warnings', 'text').execute();
  await db.schema.alterTable('agent_runs').addColumn('sources', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('agent_runs').dropColumn('sources').execute();
  await db.schema.alterTable('agent_runs').dropColumn('warnings').execute();
}
