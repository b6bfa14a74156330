import { sql } from 'kysely';
import type { Executor } from '../database.js';

export interface MonthUsage {
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
}

export async function findMonthUsage(db: Executor, workspaceId: string, month: string): Promise<MonthUsage> {
  const row = await db
    .selectFrom('usage_ledger')
    .select(['input_tokens', 'output_tokens', 'cost_usd'])
    .where('workspace_id', '=', workspaceId)
    .where('month', '=', month)
    .executeTakeFirst();
  return {
    inputTokens: Number(row?.input_tokens ?? 0),
    outputTokens: Number(row?.output_tokens ?? 0),
    costUsd: Number(row?.cost_usd ?? 0),
  };
}

/** Adds usage to the workspace's month, creating the month's row on first use. */
export async function addMonthUsage(
  db: Executor,
  workspaceId: string,
  month: string,
  usage: MonthUsage,
  now: string,
): Promise<void> {
  await db
    .insertInto('usage_ledger')
    .values({
      workspace_id: workspaceId,
      month,
      input_tokens: usage.inputTokens,
      output_tokens: usage.outputTokens,
      cost_usd: usage.costUsd,
      updated_at: now,
    })
    .onConflict((oc) =>
      oc.columns(['workspace_id', 'month']).doUpdateSet({
        input_tokens: sql<number>`usage_ledger.input_tokens + excluded.input_tokens`,
        output_tokens: sql<number>`usage_ledger.output_tokens + excluded.output_tokens`,
        cost_usd: sql<number>`usage_ledger.cost_usd + excluded.cost_usd`,
        updated_at: now,
      }),
    )
    .execute();
}

/**
 * Adds model usage that no stored message carries to the usage report's rollup (the messages
 * trigger keeps the rest): embeddings of project files and search queries under agent id `''`
 * (counted in the totals, by model and by day, left out of `byAgent`), and replies that stored
 * no message (a call that named no chat, a chat deleted meanwhile) under their agent.
 */
export async function addDailyUsage(
  db: Executor,
  usage: {
    workspaceId: string;
    date: string;
    /** `''`: no agent. */
    agentId: string;
    model: string;
    inputTokens: number;
    outputTokens: number;
    costUsd: number;
  },
): Promise<void> {
  await db
    .insertInto('usage_daily')
    .values({
      workspace_id: usage.workspaceId,
      date: usage.date,
      agent_id: usage.agentId,
      model: usage.model,
      input_tokens: usage.inputTokens,
      output_tokens: usage.outputTokens,
      cost_usd: usage.costUsd,
      requests: 1,
    })
    .onConflict((oc) =>
      oc.columns(['workspace_id', 'date', 'agent_id', 'model']).doUpdateSet({
        input_tokens: sql<number>`usage_daily.input_tokens + excluded.input_tokens`,
        output_tokens: sql<number>`usage_daily.output_tokens + excluded.output_tokens`,
        cost_usd: sql<number>`usage_daily.cost_usd + excluded.cost_usd`,
        requests: sql<number>`usage_daily.requests + 1`,
      }),
    )
    .execute();
}
