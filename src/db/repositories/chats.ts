import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { ChatTable, Database } from '../schema.js';

type Executor = Db | Transaction<Database>;

/** A chat of the workspace, or undefined. */
export function findChat(db: Executor, workspaceId: string, chatId: string) {
  return db
    .selectFrom('chats')
    .selectAll()
    .where('id', '=', chatId)
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
}

export async function insertChat(db: Executor, chat: ChatTable): Promise<void> {
  await db.insertInto('chats').values(chat).execute();
}

/** Adds to what the chat has spent (its spend cap is checked against this) and touches it. */
export async function addChatSpend(
  db: Executor,
  chatId: string,
  costUsd: number,
  now: string,
): Promise<void> {
  await db
    .updateTable('chats')
    .set({ spend_usd: sql<number>`spend_usd + ${costUsd}`, updated_at: now })
    .where('id', '=', chatId)
    .execute();
}

/**
 * Appends a note to a project's memory in one statement, so that concurrent `remember` calls
 * never lose each other's notes. Notes are separated by a blank line (the memory is markdown).
 */
export async function appendProjectMemory(
  db: Executor,
  workspaceId: string,
  projectId: string,
  note: string,
  now: string,
): Promise<boolean> {
  const result = await db
    .updateTable('projects')
    .set({
      memory: sql<string>`case when memory = '' then ${note} else memory || ${`\n\n${note}`} end`,
      updated_at: now,
    })
    .where('id', '=', projectId)
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** A live agent with its workspace in one query (the hot path of `/chat` and runs). */
export async function findAgentWithWorkspace(db: Executor, agentId: string) {
  const row = await db
    .selectFrom('agents')
    .innerJoin('workspaces', 'workspaces.id', 'agents.workspace_id')
    .selectAll('agents')
    .select([
      'workspaces.organization_id as ws_organization_id',
      'workspaces.default_model as ws_default_model',
      'workspaces.monthly_tokens as ws_monthly_tokens',
      'workspaces.monthly_cost_usd as ws_monthly_cost_usd',
      'workspaces.chat_spend_cap_usd as ws_chat_spend_cap_usd',
    ])
    .where('agents.id', '=', agentId)
    .where('agents.deleted_at', 'is', null)
    .executeTakeFirst();
  if (!row) return undefined;
  const {
    ws_organization_id,
    ws_default_model,
    ws_monthly_tokens,
    ws_monthly_cost_usd,
    ws_chat_spend_cap_usd,
    ...agent
  } = row;
  return {
    agent,
    workspace: {
      id: agent.workspace_id,
      organization_id: ws_organization_id,
      default_model: ws_default_model,
      monthly_tokens: ws_monthly_tokens,
      monthly_cost_usd: ws_monthly_cost_usd,
      chat_spend_cap_usd: ws_chat_spend_cap_usd,
    },
  };
}
