import type { Db } from '../database.js';
import { inCodePointOrder } from '../sort-key.js';
import { MODEL_KIND_AND_PRICING } from './models.js';

/**
 * Usage of a workspace between two UTC days (`from` inclusive, `to` exclusive), by agent, model
 * and day, from the rollup the messages trigger keeps (010-management): every model call's
 * tokens are on an assistant message (chat turns, agent runs, and the sub-agent calls folded
 * into their lead's reply, whose share the reply's store counts under the sub-agent instead),
 * so the rollup adds up to the stored replies.
 */
export async function usageGroups(db: Db, workspaceId: string, from: string, to: string) {
  const rows = await db
    .selectFrom('usage_daily')
    .select(['agent_id', 'model', 'date', 'input_tokens', 'output_tokens', 'cost_usd', 'requests'])
    .where('workspace_id', '=', workspaceId)
    .where('date', '>=', from)
    .where('date', '<', to)
    .execute();
  // PostgreSQL answers bigint columns as text; both engines' numbers are normalised here.
  return rows.map((row) => ({
    agentId: row.agent_id,
    model: row.model,
    date: row.date,
    inputTokens: Number(row.input_tokens),
    outputTokens: Number(row.output_tokens),
    costUsd: Number(row.cost_usd),
    requests: Number(row.requests),
  }));
}

/**
 * Models the workspace enables, with provider and pricing (unknown ids: no registry row), by id
 * in code point order (the same on both engines).
 */
export function workspaceModels(db: Db, workspaceId: string) {
  return db
    .selectFrom('workspace_models')
    .leftJoin('models', 'models.id', 'workspace_models.model_id')
    .select(['workspace_models.model_id as id', 'models.provider_id as provider', ...MODEL_KIND_AND_PRICING])
    .where('workspace_models.workspace_id', '=', workspaceId)
    .orderBy(inCodePointOrder(db, 'workspace_models.model_id'))
    .execute();
}

export function findModelPricing(db: Db, modelId: string) {
  return db
    .selectFrom('models')
    .select([
      'id',
      'provider_id as provider',
      'kind',
      'input_per_mtok as inputPerMTok',
      'output_per_mtok as outputPerMTok',
    ])
    .where('id', '=', modelId)
    .executeTakeFirst();
}
