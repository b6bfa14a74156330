import type { Db } from '../database.js';
import { rowCache } from '../row-cache.js';

/** A model's kind and prices, as the model list and usage reports show them. */
export const MODEL_KIND_AND_PRICING = [
  'models.kind as kind',
  'models.input_per_mtok as inputPerMTok',
  'models.output_per_mtok as outputPerMTok',
] as const;

const modelsWithProviders = rowCache<NonNullable<Awaited<ReturnType<typeof readModelWithProvider>>>>([
  'models',
  'providers',
]);

/**
 * A model of the registry with its provider, or undefined when the id is not defined; from
 * memory while neither changed (src/db/row-cache.ts). The object is shared: not to be changed.
 */
export function findModelWithProvider(db: Db, modelId: string, version?: number) {
  return modelsWithProviders(db, modelId, () => readModelWithProvider(db, modelId), version);
}

function readModelWithProvider(db: Db, modelId: string) {
  return db
    .selectFrom('models')
    .leftJoin('providers', 'providers.id', 'models.provider_id')
    .select([
      'models.id as id',
      'models.provider_id as providerId',
      'models.provider_model as providerModel',
      ...MODEL_KIND_AND_PRICING,
      'providers.type as providerType',
      'providers.base_url as baseUrl',
      'providers.api_key as apiKey',
      'providers.api_key_env as apiKeyEnv',
    ])
    .where('models.id', '=', modelId)
    .executeTakeFirst();
}

/**
 * Which of `modelIds` the workspace enables as chat models (one query for a page of agents, or
 * one model). An entry later redefined as an embedding model no longer counts.
 */
export async function enabledModelIds(db: Db, workspaceId: string, modelIds: string[]): Promise<Set<string>> {
  if (modelIds.length === 0) return new Set();
  const rows = await db
    .selectFrom('workspace_models')
    .leftJoin('models', 'models.id', 'workspace_models.model_id')
    .select('workspace_models.model_id as model_id')
    .where('workspace_models.workspace_id', '=', workspaceId)
    .where('workspace_models.model_id', 'in', modelIds)
    .where((eb) => eb.or([eb('models.kind', 'is', null), eb('models.kind', '=', 'chat')]))
    .execute();
  return new Set(rows.map((row) => row.model_id));
}
