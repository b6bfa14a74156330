import type { Db } from '../database.js';

/** A model of the registry with its provider, or undefined when the id is not defined. */
export function findModelWithProvider(db: Db, modelId: string) {
  return db
    .selectFrom('models')
    .leftJoin('providers', 'providers.id', 'models.provider_id')
    .select([
      'models.id as id',
      'models.provider_id as providerId',
      'models.provider_model as providerModel',
      'models.input_per_mtok as inputPerMTok',
      'models.output_per_mtok as outputPerMTok',
      'providers.type as providerType',
      'providers.base_url as baseUrl',
      'providers.api_key as apiKey',
      'providers.api_key_env as apiKeyEnv',
    ])
    .where('models.id', '=', modelId)
    .executeTakeFirst();
}

/** Which of `modelIds` the workspace enables (one query for a page of agents, or one model). */
export async function enabledModelIds(db: Db, workspaceId: string, modelIds: string[]): Promise<Set<string>> {
  if (modelIds.length === 0) return new Set();
  const rows = await db
    .selectFrom('workspace_models')
    .select('model_id')
    .where('workspace_id', '=', workspaceId)
    .where('model_id', 'in', modelIds)
    .execute();
  return new Set(rows.map((row) => row.model_id));
}
