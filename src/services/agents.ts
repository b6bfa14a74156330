import type { Db } from '../db/database.js';
import { listListedAgentsJson } from '../db/repositories/agents.js';
import { jsonDataBody, jsonObjectText } from '../db/json-page.js';
import { listingCache } from '../db/listing-cache.js';
import type { AgentTable } from '../db/schema.js';
import type { ModelRegistry } from '../models/registry.js';
import type { WorkspaceAccess } from './access.js';
import type { Page } from './paging.js';

export const AGENT_PAGE = { defaultLimit: 20, maxLimit: 100 } as const;

type ListedAgent = Pick<
  AgentTable,
  'id' | 'title' | 'description' | 'image' | 'category' | 'visibility' | 'model' | 'created_at' | 'updated_at'
>;

/** `model` is the model the agent runs on (`runsOn`, see listAgents). */
export function agentView(agent: ListedAgent, runsOn: string) {
  return {
    id: agent.id,
    title: agent.title,
    description: agent.description,
    image: agent.image,
    model: runsOn,
    visibility: agent.visibility,
    category: agent.category,
    createdAt: agent.created_at,
    updatedAt: agent.updated_at,
  };
}

/**
 * A page of listed agents: the listing's response body as JSON text, its `data` built by the
 * database (each agent as `agentView`, with the model it runs on); kept while no agent and none
 * of the workspace's models change (src/db/listing-cache.ts).
 */
export async function listAgents(
  db: Db,
  models: ModelRegistry,
  access: WorkspaceAccess,
  page: Page,
): Promise<Buffer> {
  const query = {
    workspaceId: access.workspaceId,
    limit: page.limit,
    offset: page.offset,
    onlyIds: access.principal.agentIds,
    fallback: access.defaultModel ?? models.builtInDefaultModelId(),
  };
  return agentListings(
    db,
    JSON.stringify(query),
    async () => {
      const { page: agents, total } = await listListedAgentsJson(db, query);
      return jsonDataBody(
        jsonObjectText({
          agents,
          pagination: JSON.stringify({ total, limit: page.limit, offset: page.offset }),
        }),
      );
    },
    access.principal.dataVersion,
  );
}

/** `model` depends on the workspace's chat models as well as on the agent. */
const agentListings = listingCache(['agents', 'workspace_models', 'models']);
