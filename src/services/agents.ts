import type { Db } from '../db/database.js';
import { listListedAgents } from '../db/repositories/agents.js';
import type { AgentTable } from '../db/schema.js';
import type { ModelRegistry } from '../models/registry.js';
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
  'id' | 'title' | 'description' | 'image' | 'category' | 'visibility' | 'created_at' | 'updated_at'
> & {
  /** The agent's own model when the workspace enables it, else null. */
  enabled_model: string | null;
};

/**
 * `model` is the model the agent runs on: its own when the workspace enables it, else the
 * model a chat falls back to (`ModelRegistry.resolveForWorkspace` follows the same rule).
 */
export function agentView(agent: ListedAgent, fallbackModel: string) {
  return {
    id: agent.id,
    title: agent.title,
    description: agent.description,
    image: agent.image,
    model: agent.enabled_model ?? fallbackModel,
    visibility: agent.visibility,
    category: agent.category,
    createdAt: agent.created_at,
    updatedAt: agent.updated_at,
  };
}

export async function listAgents(db: Db, models: ModelRegistry, access: WorkspaceAccess, page: Page) {
  const { rows, total } = await listListedAgents(db, access.workspaceId, page.limit, page.offset);
  const fallbackModel = access.defaultModel ?? models.builtInDefaultModelId();
  return {
    agents: rows.map((agent) => agentView(agent, fallbackModel)),
    pagination: { total, limit: page.limit, offset: page.offset },
  };
}
