import { sql } from 'kysely';
import type { Db } from '../database.js';

/**
 * Usage of a workspace between two instants, grouped by agent, model and UTC day in one pass.
 * Every model call's tokens are on an assistant message (chat turns, agent runs, and the
 * sub-agent calls folded into their lead's reply), so messages alone add up to the total.
 */
export async function usageGroups(db: Db, workspaceId: string, from: string, to: string) {
  const rows = await db
    .selectFrom('messages')
    .innerJoin('chats', 'chats.id', 'messages.chat_id')
    .select([
      'chats.agent_id as agentId',
      'messages.model as model',
      sql<string>`substr(messages.created_at, 1, 10)`.as('date'),
      (eb) => eb.fn.sum<number>('messages.input_tokens').as('inputTokens'),
      (eb) => eb.fn.sum<number>('messages.output_tokens').as('outputTokens'),
      (eb) => eb.fn.sum<number>('messages.cost_usd').as('costUsd'),
      (eb) => eb.fn.countAll<number>().as('requests'),
    ])
    .where('messages.workspace_id', '=', workspaceId)
    .where('messages.created_at', '>=', from)
    .where('messages.created_at', '<', to)
    .where('messages.role', '=', 'assistant')
    .groupBy(['chats.agent_id', 'messages.model', sql`substr(messages.created_at, 1, 10)`])
    .execute();
  // PostgreSQL answers sums of bigint as text; both engines' numbers are normalised here.
  return rows.map((row) => ({
    agentId: row.agentId,
    model: row.model ?? '',
    date: row.date,
    inputTokens: Number(row.inputTokens),
    outputTokens: Number(row.outputTokens),
    costUsd: Number(row.costUsd),
    requests: Number(row.requests),
  }));
}

/** Models the workspace enables, with provider and pricing (unknown ids: no registry row). */
export function workspaceModels(db: Db, workspaceId: string) {
  return db
    .selectFrom('workspace_models')
    .leftJoin('models', 'models.id', 'workspace_models.model_id')
    .select([
      'workspace_models.model_id as id',
      'models.provider_id as provider',
      'models.input_per_mtok as inputPerMTok',
      'models.output_per_mtok as outputPerMTok',
    ])
    .where('workspace_models.workspace_id', '=', workspaceId)
    .orderBy('workspace_models.model_id')
    .execute();
}

export function findModelPricing(db: Db, modelId: string) {
  return db
    .selectFrom('models')
    .select([
      'id',
      'provider_id as provider',
      'input_per_mtok as inputPerMTok',
      'output_per_mtok as outputPerMTok',
    ])
    .where('id', '=', modelId)
    .executeTakeFirst();
}
