import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import { insertAgentRun } from '../db/repositories/agent-runs.js';
import { addChatSpend, insertChat } from '../db/repositories/chats.js';
import { appendMessages, listChatMessageIds } from '../db/repositories/messages.js';
import { addMonthUsage } from '../db/repositories/usage.js';
import type { AgentRunTable, ChatTable, Database } from '../db/schema.js';
import type { ConversationMessage } from './chat-messages.js';
import { ledgerMonth } from './usage.js';

/** What one exchange stores when its reply has ended. */
export interface Exchange {
  workspaceId: string;
  /** The chat as it was when the request began; undefined: created with this exchange. */
  chat: ChatTable | undefined;
  /** The row of a chat this exchange creates. */
  newChat: ChatTable;
  /** The request's messages not stored yet. */
  added: ConversationMessage[];
  startedAt: Date;
  finishedAt: Date;
  /** The assistant message, when the model answered. */
  reply?: {
    id: string;
    parts: unknown[];
    model: string;
    inputTokens: number;
    outputTokens: number;
    costUsd: number;
  };
  subRuns: AgentRunTable[];
  /** Writes the caller adds to the same transaction (an agent run's record). */
  extraWrites?: (trx: Transaction<Database>) => Promise<void>;
}

/**
 * One transaction: the chat (when new), the new messages, the reply, usage, sub-agent runs and
 * the caller's writes. Concurrent turns on one chat are serialised by the chat row's lock (the
 * spend update) and by a retry when both took the same message position.
 */
export async function persistExchange(db: Db, exchange: Exchange): Promise<void> {
  const { chat, workspaceId, reply } = exchange;
  const chatId = exchange.newChat.id;
  const now = exchange.finishedAt.toISOString();
  const costUsd = reply?.costUsd ?? 0;
  await withConflictRetry(Boolean(chat), (attempt) =>
    db.transaction().execute(async (trx) => {
      if (!chat) await insertChat(trx, { ...exchange.newChat, spend_usd: costUsd, updated_at: now });
      else await addChatSpend(trx, chatId, costUsd, now);
      // What a concurrent turn already stored is skipped.
      const storedNow = chat || attempt > 0 ? await listChatMessageIds(trx, workspaceId, chatId) : undefined;
      const rows = exchange.added
        .filter((message) => !storedNow?.has(message.id))
        .map((message) => ({
          id: message.id,
          workspace_id: workspaceId,
          role: message.role,
          parts: JSON.stringify(message.parts),
          model: null as string | null,
          input_tokens: 0,
          output_tokens: 0,
          cost_usd: 0,
          created_at: exchange.startedAt.toISOString(),
        }));
      if (reply) {
        rows.push({
          id: reply.id,
          workspace_id: workspaceId,
          role: 'assistant',
          parts: JSON.stringify(reply.parts),
          model: reply.model,
          input_tokens: reply.inputTokens,
          output_tokens: reply.outputTokens,
          cost_usd: reply.costUsd,
          created_at: now,
        });
      }
      await appendMessages(trx, chatId, rows, chat ? undefined : 0);
      if (reply && (reply.inputTokens > 0 || reply.outputTokens > 0)) {
        await addMonthUsage(
          trx,
          workspaceId,
          ledgerMonth(exchange.finishedAt),
          { inputTokens: reply.inputTokens, outputTokens: reply.outputTokens, costUsd },
          now,
        );
      }
      for (const run of exchange.subRuns) await insertAgentRun(trx, run);
      await exchange.extraWrites?.(trx);
    }),
  );
}

/** SQLite and PostgreSQL report a unique or primary key violation differently. */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/**
 * Two requests on one chat may both take the next message position; the loser's transaction
 * fails on the (chat_id, position) key and is run again, after the winner's messages.
 */
export async function withConflictRetry(
  retryable: boolean,
  write: (attempt: number) => Promise<void>,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await write(attempt);
      return;
    } catch (error) {
      if (!retryable || attempt >= 4 || !isUniqueViolation(error)) throw error;
    }
  }
}
