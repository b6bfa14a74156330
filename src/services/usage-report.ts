import type { Db } from '../db/database.js';
import { memberVisibleAgentIdsIn } from '../db/repositories/agents.js';
import { findWorkspace } from '../db/repositories/tenancy.js';
import { findModelPricing, usageGroups, workspaceModels } from '../db/repositories/usage-report.js';
import { type ModelRegistry, shownUsd } from '../models/registry.js';
import { isManager, type WorkspaceAccess } from './access.js';
import { ledgerMonth } from './usage.js';

interface Totals {
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
  requests: number;
}

const zero = (): Totals => ({ inputTokens: 0, outputTokens: 0, costUsd: 0, requests: 0 });

function add(into: Totals, from: Totals) {
  into.inputTokens += from.inputTokens;
  into.outputTokens += from.outputTokens;
  into.costUsd += from.costUsd;
  into.requests += from.requests;
}

/** Sums of many small costs carry float noise; a report shows them as every cost is shown. */
const roundCost = (totals: Totals): Totals => ({ ...totals, costUsd: shownUsd(totals.costUsd) });

function grouped<K extends string>(key: K, groups: Map<string, Totals>) {
  return [...groups.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([value, totals]) => ({ [key]: value, ...roundCost(totals) }) as { [P in K]: string } & Totals);
}

/**
 * `YYYY-MM` → the days from its first (inclusive) to `YYYY-MM-32` (exclusive): every day of the
 * month sorts between them, and no other. Written as text, not computed with `Date`, which reads
 * years 0–99 as 1900–1999 and has no `YYYY` form of the month after 9999-12.
 */
function monthRange(month: string): { from: string; to: string } {
  return { from: `${month}-01`, to: `${month}-32` };
}

export async function usageReport(db: Db, access: WorkspaceAccess, now: Date, month = ledgerMonth(now)) {
  const { from, to } = monthRange(month);
  const [groups, workspace] = await Promise.all([
    usageGroups(db, access.workspaceId, from, to),
    findWorkspace(db, access.workspaceId),
  ]);
  const total = zero();
  const byAgent = new Map<string, Totals>();
  const byModel = new Map<string, Totals>();
  const byDay = new Map<string, Totals>();
  for (const group of groups) {
    add(total, group);
    // Embeddings (agent id '') count in the totals, by model and by day, but belong to no agent.
    if (group.agentId !== '') {
      if (!byAgent.has(group.agentId)) byAgent.set(group.agentId, zero());
      add(byAgent.get(group.agentId)!, group);
    }
    for (const [map, key] of [
      [byModel, group.model],
      [byDay, group.date],
    ] as const) {
      if (!map.has(key)) map.set(key, zero());
      add(map.get(key)!, group);
    }
  }
  // A member is not told of agents they cannot see (private ones, as in the agent list): that
  // usage stays in the totals, by model and by day, which are the workspace's, but is unnamed.
  if (!isManager(access)) {
    const visible = await memberVisibleAgentIdsIn(db, access.workspaceId, [...byAgent.keys()]);
    for (const agentId of byAgent.keys()) if (!visible.has(agentId)) byAgent.delete(agentId);
  }
  return {
    month,
    ...roundCost(total),
    limits: {
      monthlyTokens: workspace?.monthly_tokens == null ? null : Number(workspace.monthly_tokens),
      monthlyCostUsd: workspace?.monthly_cost_usd ?? null,
    },
    byAgent: grouped('agentId', byAgent),
    byModel: grouped('model', byModel),
    byDay: grouped('date', byDay),
  };
}

/**
 * The models a workspace may use: those it enables, and its default (which always runs), as
 * chat models; and its embedding model, if it names one.
 */
export async function listWorkspaceModels(db: Db, models: ModelRegistry, access: WorkspaceAccess) {
  const [enabled, workspace] = await Promise.all([
    workspaceModels(db, access.workspaceId),
    findWorkspace(db, access.workspaceId),
  ]);
  // An entry redefined as an embedding model is no chat model of the workspace any more.
  const rows = enabled.filter((row) => row.kind !== 'embedding');
  const defaultId = access.defaultModel ?? models.builtInDefaultModelId();
  if (!rows.some((row) => row.id === defaultId)) {
    const found = await findModelPricing(db, defaultId);
    rows.unshift({
      id: defaultId,
      provider: found?.provider ?? null,
      kind: 'chat',
      inputPerMTok: found?.inputPerMTok ?? null,
      outputPerMTok: found?.outputPerMTok ?? null,
    });
  }
  const listed = rows.map((row) => ({ ...row, kind: 'chat' as 'chat' | 'embedding' }));
  const embeddingId = workspace?.embedding_model;
  if (embeddingId) {
    const found = await findModelPricing(db, embeddingId);
    listed.push({
      id: embeddingId,
      provider: found?.provider ?? null,
      kind: 'embedding',
      inputPerMTok: found?.inputPerMTok ?? null,
      outputPerMTok: found?.outputPerMTok ?? null,
    });
  }
  return listed.map((row) => ({
    id: row.id,
    kind: row.kind,
    provider: row.provider ?? (row.id.startsWith('atrium/') ? 'atrium' : row.id.split('/')[0]!),
    default: row.kind === 'chat' && row.id === defaultId,
    pricing: { inputPerMTok: Number(row.inputPerMTok ?? 0), outputPerMTok: Number(row.outputPerMTok ?? 0) },
  }));
}
