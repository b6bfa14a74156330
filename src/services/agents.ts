import type { Db } from '../db/database.js';
import { listListedAgents } from '../db/repositories/agents.js';
import { enabledModelIds } from '../db/repositories/models.js';
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

export async function listAgents(db: Db, models: ModelRegistry, access: WorkspaceAccess, page: Page) {
  const { rows, total } = await listListedAgents(
    db,
    access.workspaceId,
    page.limit,
    page.offset,
    access.principal.agentIds,
  );
  // The rule chats follow (`ModelRegistry.resolveForWorkspace`): the agent's own model when the
  // workspace enables it, else the fallback. Most agents have none: then no second query.
  const fallback = access.defaultModel ?? models.builtInDefaultModelId();
  const own = [
    ...new Set(rows.map((agent) => agent.model).filter((m): m is string => !!m && m !== fallback)),
  ];
  const enabled = await enabledModelIds(db, access.workspaceId, own);
  const runsOn = (agent: ListedAgent) =>
    agent.model && (agent.model === fallback || enabled.has(agent.model)) ? agent.model : fallback;
  return {
    agents: rows.map((agent) => agentView(agent, runsOn(agent))),
    pagination: { total, limit: page.limit, offset: page.offset },
  };
}
