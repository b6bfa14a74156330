import type { Db } from '../db/database.js';
import { listListedAgents } from '../db/repositories/agents.js';
import { accessRequestWorkspace, type Principal } from './access.js';
import { modelNotFound } from './openai-chat.js';

/** Models are agents: no paging in OpenAI's list, so the whole list, in the agent list's order. */
const MAX_MODELS = 10_000;

type ListedAgent = Awaited<ReturnType<typeof listListedAgents>>['rows'][number];

function modelView(agent: ListedAgent) {
  return {
    id: agent.id,
    object: 'model' as const,
    created: Math.floor(Date.parse(agent.created_at) / 1000),
    owned_by: 'atrium' as const,
    name: agent.title,
    description: agent.description ?? null,
  };
}

/** The agents the key may use in its workspace (an organization key names it in `x-workspace-id`). */
export async function listModels(db: Db, principal: Principal, headerWorkspaceId: string | undefined) {
  const access = await accessRequestWorkspace(db, principal, headerWorkspaceId);
  // The agent list's set, also its `agentIds` limit: session tokens are refused on this door today
  // (docs/management.md), and must not see more here if it is ever opened to them.
  const { rows } = await listListedAgents(db, access.workspaceId, MAX_MODELS, 0, principal.agentIds);
  return { object: 'list' as const, data: rows.map(modelView) };
}

export async function getModel(
  db: Db,
  principal: Principal,
  headerWorkspaceId: string | undefined,
  id: string,
) {
  const { data } = await listModels(db, principal, headerWorkspaceId);
  const found = data.find((model) => model.id === id);
  if (!found) throw modelNotFound(id);
  return found;
}
