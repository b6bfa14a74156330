import type { Db } from '../db/database.js';
import { findMonthUsage } from '../db/repositories/usage.js';
import type { WorkspaceTable } from '../db/schema.js';
import { ApiError } from '../errors.js';
import { shownUsd } from '../models/registry.js';

/** The ledger's month of a moment: `YYYY-MM` in UTC. */
export function ledgerMonth(now: Date): string {
  return now.toISOString().slice(0, 7);
}

type Limits = Pick<WorkspaceTable, 'id' | 'monthly_tokens' | 'monthly_cost_usd'>;

/**
 * Refuses a request that starts at or over the workspace's monthly token or cost limit
 * (decisions.md: 402 `usage_limit_exceeded`). Runs before anything is persisted.
 */
export async function assertWithinWorkspaceLimits(db: Db, workspace: Limits, now: Date): Promise<void> {
  if (workspace.monthly_tokens === null && workspace.monthly_cost_usd === null) return;
  const month = ledgerMonth(now);
  const used = await findMonthUsage(db, workspace.id, month);
  const tokens = used.inputTokens + used.outputTokens;
  if (workspace.monthly_tokens !== null && tokens >= workspace.monthly_tokens) {
    throw new ApiError('usage_limit_exceeded', 'The workspace has reached its monthly token limit', {
      month,
      limitTokens: workspace.monthly_tokens,
      usedTokens: tokens,
    });
  }
  if (workspace.monthly_cost_usd !== null && used.costUsd >= workspace.monthly_cost_usd) {
    throw new ApiError('usage_limit_exceeded', 'The workspace has reached its monthly cost limit', {
      month,
      limitUsd: workspace.monthly_cost_usd,
      usedUsd: shownUsd(used.costUsd),
    });
  }
}

/** Refuses a request on a chat that has spent its cap (402 `spend_cap_exceeded`). */
export function assertWithinChatSpendCap(
  workspace: Pick<WorkspaceTable, 'chat_spend_cap_usd'>,
  chat: { id: string; spend_usd: number } | undefined,
): void {
  const cap = workspace.chat_spend_cap_usd;
  if (cap === null) return;
  const spent = chat?.spend_usd ?? 0;
  if (spent >= cap) {
    throw new ApiError('spend_cap_exceeded', 'The chat has reached its spend cap', {
      ...(chat ? { chatId: chat.id } : {}),
      capUsd: cap,
      spentUsd: shownUsd(spent),
    });
  }
}
