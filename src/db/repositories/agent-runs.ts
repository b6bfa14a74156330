import type { Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { AgentRunTable, Database } from '../schema.js';

type Executor = Db | Transaction<Database>;

export async function insertAgentRun(db: Executor, run: AgentRunTable): Promise<void> {
  await db.insertInto('agent_runs').values(run).execute();
}

export function findAgentRun(db: Executor, workspaceId: string, runId: string) {
  return db
    .selectFrom('agent_runs')
    .selectAll()
    .where('id', '=', runId)
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
}
