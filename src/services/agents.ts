import type { Db } from '../db/database.js';
import { listListedAgents } from '../db/repositories/agents.js';
import type { AgentTable } from '../db/schema.js';
import type { WorkspaceAccess } from './access.js';

export interface Page {
  limit: number;
  offset: number;
}

export const AGENT_PAGE = { defaultLimit: 20, maxLimit: 100 } as const;

/** Values above the maximum are clamped (spec §4), not refused. */
export function clampLimit(limit: number | undefined, fallback: number, max: number): number {
  return Math.min(limit ?? fallback, max);
}

type ListedAgent = Pick<
  AgentTable,
  'id' | 'title' | 'description' | 'image' | 'category' | 'visibility' | 'model' | 'created_at' | 'updated_at'
>;

export function agentView(agent: ListedAgent, workspaceDefaultModel: string | null) {
  return {
    id: agent.id,
    title: agent.title,
    description: agent.description,
    image: agent.image,
    model: agent.model ?? workspaceDefaultModel ?? 'atrium/echo',
    visibility: agent.visibility,
    category: agent.category,
    createdAt: agent.created_at,
    updatedAt: agent.updated_at,
  };
}

export async function listAgents(db: Db, access: WorkspaceAccess, page: Page) {
  const { rows, total } = await listListedAgents(db, access.workspaceId, page.limit, page.offset);
  return {
    agents: rows.map((agent) => agentView(agent, access.defaultModel)),
    pagination: { total, limit: page.limit, offset: page.offset },
  };
}
