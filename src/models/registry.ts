import { createHash } from 'node:crypto';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { EmbeddingModelV3, LanguageModelV3 } from '@ai-sdk/provider';
import { type Config, DEFAULT_MAX_PROVIDER_RESPONSE_BYTES } from '../config.js';
import type { Db } from '../db/database.js';
import { enabledModelIds, findModelWithProvider } from '../db/repositories/models.js';
import type { ProviderType } from '../db/schema.js';
import { ApiError, errors } from '../errors.js';
import { createEchoModel, ECHO_MODEL_ID } from './echo.js';
import { createEchoEmbeddingModel, ECHO_EMBEDDING_MODEL_ID } from './echo-embedding.js';
import { createNodeFetch } from './node-fetch.js';
import { guardedFetch, withStreamFailuresAsErrors } from './stream-guard.js';
import { allowTextEvents } from './text-events.js';

export interface Pricing {
  /** USD per million input tokens. */
  inputPerMTok: number;
  /** USD per million output tokens. */
  outputPerMTok: number;
}

export interface ResolvedModel {
  /** The Atrium model id (`llama3`, `atrium/echo`). */
  id: string;
  model: LanguageModelV3;
  pricing: Pricing;
}

export interface ResolvedEmbeddingModel {
  id: string;
  /**
   * What vectors are kept under: the id with the provider model it runs, so that redefining
   * the entry (another provider model, same id) never mixes old vectors with new ones.
   */
  key: string;
  /**
   * The provider settings the model runs on (type, base URL, API key, provider model), for
   * caches of its answers: a changed setup file changes it, so no cache answers with the old
   * provider's vectors. The API key is in it only as a SHA-256 digest.
   */
  providerConfig: string;
  model: EmbeddingModelV3;
  pricing: Pricing;
}

interface ProviderSettings {
  id: string;
  type: ProviderType;
  baseUrl: string | null;
  apiKey: string | null;
}

/** Models callers may name without defining them, served by the providers built in from env. */
const BUILT_IN_DEFAULTS: Record<'openai' | 'anthropic', string> = {
  openai: 'openai/gpt-4o-mini',
  anthropic: 'anthropic/claude-haiku-4-5',
};

/** Bounds the model cache when setup files keep changing provider settings. */
const MAX_CACHED_MODELS = 500;

const FREE: Pricing = { inputPerMTok: 0, outputPerMTok: 0 };

export function costUsd(pricing: Pricing, inputTokens: number, outputTokens: number): number {
  return (inputTokens * pricing.inputPerMTok + outputTokens * pricing.outputPerMTok) / 1_000_000;
}

/**
 * A cost as the API shows it: to the millionth of a cent (1e-8 USD), without the float noise of
 * prices in cents (`(1 × 0.15 + 2 × 0.6) / 1e6` is 0.0000013499999999999998). Replies, runs,
 * messages and the usage report show the same figure for the same cost; what is stored and
 * counted against limits stays unrounded.
 */
export function shownUsd(value: number): number {
  return Math.round(value * 1e8) / 1e8;
}

function embeddingModelAsChatModel(modelId: string): ApiError {
  return errors.badRequest(`Model "${modelId}" is an embedding model, not a chat model`, [
    { path: 'body.model', message: 'must be a chat model (GET /v1/workspace/{id}/models lists each kind)' },
  ]);
}

function noProvider(modelId: string, why: string): ApiError {
  return new ApiError('upstream_error', `Model "${modelId}" cannot be used: ${why}`, { model: modelId });
}

/**
 * Turns Atrium model ids into AI SDK language models: the echo model, models defined in the
 * `models` table on their `providers` row (or on the built-in `openai` / `anthropic` providers
 * configured from the environment), and `openai/<name>` / `anthropic/<name>` on those built-ins.
 * Provider clients are cached per settings, so a changed setup file takes effect at once.
 */
export class ModelRegistry {
  private readonly providers = new Map<string, (model: string) => LanguageModelV3>();
  private readonly models = new Map<string, LanguageModelV3>();
  private readonly echo = createEchoModel();
  private readonly echoEmbedding = createEchoEmbeddingModel();
  private readonly embeddingModels = new Map<string, EmbeddingModelV3>();
  private readonly fetch: typeof fetch;

  constructor(
    private readonly config: Pick<Config, 'providers'> & Partial<Pick<Config, 'maxProviderResponseBytes'>>,
  ) {
    this.fetch = createNodeFetch(config.maxProviderResponseBytes ?? DEFAULT_MAX_PROVIDER_RESPONSE_BYTES);
  }

  /** The model used when a workspace names no default. */
  builtInDefaultModelId(): string {
    if (this.config.providers.openaiApiKey) return BUILT_IN_DEFAULTS.openai;
    if (this.config.providers.anthropicApiKey) return BUILT_IN_DEFAULTS.anthropic;
    return ECHO_MODEL_ID;
  }

  /**
   * The model a request runs on: the requested one (the body's `model`, else the agent's) when
   * the workspace enables it, else — silently — the workspace default.
   */
  async resolveForWorkspace(
    db: Db,
    workspace: { id: string; default_model: string | null },
    requested: string | undefined,
    /** The request's `Principal.dataVersion`: the registry entry may come from memory as of then. */
    version?: number,
  ): Promise<ResolvedModel> {
    const fallback = workspace.default_model ?? this.builtInDefaultModelId();
    let modelId = fallback;
    // Any other model not enabled falls back silently; an embedding model is a mistake to say.
    if (requested === ECHO_EMBEDDING_MODEL_ID) throw embeddingModelAsChatModel(requested);
    if (requested && requested !== fallback) {
      if ((await enabledModelIds(db, workspace.id, [requested])).has(requested)) modelId = requested;
      else if ((await findModelWithProvider(db, requested))?.kind === 'embedding') {
        throw embeddingModelAsChatModel(requested);
      }
    }
    return this.resolve(db, modelId, version);
  }

  async resolve(db: Db, modelId: string, version?: number): Promise<ResolvedModel> {
    if (modelId === ECHO_MODEL_ID) return { id: modelId, model: this.echo, pricing: FREE };
    if (modelId === ECHO_EMBEDDING_MODEL_ID) throw embeddingModelAsChatModel(modelId);
    const row = await findModelWithProvider(db, modelId, version);
    if (row?.kind === 'embedding') throw embeddingModelAsChatModel(modelId);
    if (row) {
      const pricing = { inputPerMTok: row.inputPerMTok, outputPerMTok: row.outputPerMTok };
      const settings = this.rowProvider(row, modelId);
      return { id: modelId, model: this.languageModel(settings, row.providerModel), pricing };
    }
    const slash = modelId.indexOf('/');
    const prefix = modelId.slice(0, slash);
    if (slash > 0 && (prefix === 'openai' || prefix === 'anthropic')) {
      const settings = this.builtInProvider(prefix, modelId);
      return { id: modelId, model: this.languageModel(settings, modelId.slice(slash + 1)), pricing: FREE };
    }
    throw noProvider(modelId, 'it is not defined in the models registry');
  }

  /** An embedding model (`kind: embedding` in the setup file, or the development one). */
  async resolveEmbedding(db: Db, modelId: string): Promise<ResolvedEmbeddingModel> {
    if (modelId === ECHO_EMBEDDING_MODEL_ID) {
      return {
        id: modelId,
        key: `${modelId}|atrium|echo-embedding`,
        providerConfig: `${modelId}|atrium|echo-embedding`,
        model: this.echoEmbedding,
        pricing: FREE,
      };
    }
    const row = await findModelWithProvider(db, modelId);
    if (!row) throw noProvider(modelId, 'it is not defined in the models registry');
    if (row.kind !== 'embedding') throw noProvider(modelId, 'it is not an embedding model (kind: embedding)');
    const settings = this.rowProvider(row, modelId);
    const providerConfig = embeddingProviderConfig(settings, row.providerModel);
    let model = this.embeddingModels.get(providerConfig);
    if (!model) {
      model = createEmbeddingModel(settings, this.fetch, modelId, row.providerModel);
      if (this.embeddingModels.size >= MAX_CACHED_MODELS) this.embeddingModels.clear();
      this.embeddingModels.set(providerConfig, model);
    }
    return {
      id: modelId,
      key: `${modelId}|${row.providerId}|${row.providerModel}`,
      providerConfig,
      model,
      pricing: { inputPerMTok: row.inputPerMTok, outputPerMTok: row.outputPerMTok },
    };
  }

  /** The provider a stored model row names: its own settings, or a built-in one from the environment. */
  private rowProvider(
    row: NonNullable<Awaited<ReturnType<typeof findModelWithProvider>>>,
    modelId: string,
  ): ProviderSettings {
    return row.providerType
      ? {
          id: row.providerId,
          type: row.providerType,
          baseUrl: row.baseUrl,
          apiKey: row.apiKey ?? (row.apiKeyEnv ? (this.config.providers.env[row.apiKeyEnv] ?? null) : null),
        }
      : this.builtInProvider(row.providerId, modelId);
  }

  private builtInProvider(providerId: string, modelId: string): ProviderSettings {
    const { openaiApiKey, anthropicApiKey, openaiBaseUrl } = this.config.providers;
    if (providerId === 'openai' && openaiApiKey) {
      return { id: 'openai', type: 'openai', baseUrl: openaiBaseUrl ?? null, apiKey: openaiApiKey };
    }
    if (providerId === 'anthropic' && anthropicApiKey) {
      return { id: 'anthropic', type: 'anthropic', baseUrl: null, apiKey: anthropicApiKey };
    }
    throw noProvider(modelId, `provider "${providerId}" is not configured`);
  }

  private languageModel(settings: ProviderSettings, providerModel: string): LanguageModelV3 {
    // Model objects are cached too: building one compiles the provider's response schemas,
    // which costs more than the rest of a request.
    const cacheKey = `${JSON.stringify(settings)}\u0000${providerModel}`;
    let model = this.models.get(cacheKey);
    if (!model) {
      let factory = this.providers.get(JSON.stringify(settings));
      if (!factory) {
        factory = createProviderFactory(settings, this.fetch);
        this.providers.set(JSON.stringify(settings), factory);
      }
      model = factory(providerModel);
      // OpenAI-style streams: plain text events may skip the provider's parser (text-events.ts).
      model = settings.type === 'anthropic' ? withStreamFailuresAsErrors(model) : allowTextEvents(model);
      if (this.models.size >= MAX_CACHED_MODELS) this.models.clear();
      this.models.set(cacheKey, model);
    }
    return model;
  }
}

function createProviderFactory(
  settings: ProviderSettings,
  baseFetch: typeof fetch,
): (model: string) => LanguageModelV3 {
  const openAiFetch = guardedFetch(baseFetch);
  const apiKey = settings.apiKey ?? undefined;
  const baseURL = settings.baseUrl ?? undefined;
  switch (settings.type) {
    case 'openai': {
      // The chat completions API: what every OpenAI-compatible server speaks too.
      const provider = createOpenAI({ apiKey, baseURL, name: settings.id, fetch: openAiFetch });
      return (model) => provider.chat(model);
    }
    case 'anthropic': {
      const provider = createAnthropic({ apiKey, baseURL, name: settings.id, fetch: baseFetch });
      return (model) => provider(model);
    }
    case 'openai-compatible': {
      const provider = createOpenAICompatible({
        name: settings.id,
        baseURL: baseURL ?? '',
        apiKey,
        // Without it, streamed replies report no token usage.
        includeUsage: true,
        fetch: openAiFetch,
      });
      return (model) => provider.chatModel(model);
    }
  }
}

/** `ResolvedEmbeddingModel.providerConfig`: every setting the provider calls are made with. */
function embeddingProviderConfig(settings: ProviderSettings, providerModel: string): string {
  const apiKey =
    settings.apiKey === null ? null : createHash('sha256').update(settings.apiKey).digest('base64url');
  return JSON.stringify([settings.type, settings.id, settings.baseUrl, apiKey, providerModel]);
}

function createEmbeddingModel(
  settings: ProviderSettings,
  fetch: typeof globalThis.fetch,
  modelId: string,
  providerModel: string,
): EmbeddingModelV3 {
  const apiKey = settings.apiKey ?? undefined;
  const baseURL = settings.baseUrl ?? undefined;
  switch (settings.type) {
    case 'openai':
      return createOpenAI({ apiKey, baseURL, name: settings.id, fetch }).embeddingModel(providerModel);
    case 'openai-compatible':
      return createOpenAICompatible({
        name: settings.id,
        baseURL: baseURL ?? '',
        apiKey,
        fetch,
      }).embeddingModel(providerModel);
    case 'anthropic':
      throw noProvider(modelId, 'Anthropic offers no embedding models');
  }
}
