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
 * Adds model usage made without an agent (embeddings of project files and search queries) to
 * the usage report's rollup, under agent id `''`: the report counts it in its totals, by model
 * and by day, and leaves it out of `byAgent`.
 */
export async function addUnattributedDailyUsage(
  db: Executor,
  usage: { workspaceId: string; date: string; model: string; inputTokens: number; costUsd: number },
): Promise<void> {
  await db
    .insertInto('usage_daily')
    .values({
      workspace_id: usage.workspaceId,
      date: usage.date,
      agent_id: '',
      model: usage.model,
      input_tokens: usage.inputTokens,
      output_tokens: 0,
      cost_usd: usage.costUsd,
      requests: 1,
    })
    .onConflict((oc) =>
      oc.columns(['workspace_id', 'date', 'agent_id', 'model']).doUpdateSet({
        input_tokens: sql<number>`usage_daily.input_tokens + excluded.input_tokens`,
        cost_usd: sql<number>`usage_daily.cost_usd + excluded.cost_usd`,
        requests: sql<number>`usage_daily.requests + 1`,
      }),
    )
    .execute();
}
