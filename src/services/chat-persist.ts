import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import { insertAgentRun } from '../db/repositories/agent-runs.js';
import { insertChat, recordChatMessages, recountChatMessages } from '../db/repositories/chats.js';
import {
  appendMessages,
  deleteChatMessages,
  listChatMessageIds,
  messageUnderId,
} from '../db/repositories/messages.js';
import { addDailyUsage, addMonthUsage } from '../db/repositories/usage.js';
import type { AgentRunTable, ChatTable, Database, MessageTable } from '../db/schema.js';
import type { ConversationMessage } from './chat-messages.js';
import { errors } from '../errors.js';
import { newId } from '../ids.js';
import { ledgerMonth } from './usage.js';

type MessageRow = Omit<MessageTable, 'position' | 'chat_id'>;

/** The user's turn, stored before the model is called. */
export interface Turn {
  workspaceId: string;
  /** The row of a chat this turn creates; undefined: the chat exists. */
  newChat?: ChatTable;
  chatId: string;
  /** The request's messages not stored yet. */
  added: ConversationMessage[];
  /** Stored messages this turn replaces (an edited user message and the ones after it). */
  removes?: string[];
  at: Date;
}

/**
 * One transaction: the chat (when new) and the request's new messages (in place of the messages
 * an edit replaces), so that the chat id the client is told exists at once, and a reply lost to
 * a crash leaves the user's turn stored.
 * What a concurrent turn stored meanwhile is skipped.
 */
export async function storeTurn(db: Db, turn: Turn): Promise<void> {
  const now = turn.at.toISOString();
  await withConflictRetry(!turn.newChat, () =>
    db.transaction().execute(async (trx) => {
      const messageRows = (messages: ConversationMessage[]): MessageRow[] =>
        messages.map((message) => ({
          id: message.id,
          workspace_id: turn.workspaceId,
          role: message.role,
          parts: JSON.stringify(message.parts),
          model: null,
          input_tokens: 0,
          output_tokens: 0,
          cost_usd: 0,
          finish_reason: null,
          created_at: now,
        }));
      if (turn.newChat) {
        // A new chat is inserted with its messages counted: no second write to its row.
        const rows = messageRows(turn.added);
        await insertChat(trx, {
          ...turn.newChat,
          message_count: rows.length,
          last_message_at: rows.length > 0 ? now : turn.newChat.last_message_at,
          updated_at: now,
        });
        await appendMessages(trx, turn.chatId, rows, 0);
        return;
      }
      // Write before reading: the chat's row lock on PostgreSQL, the write lock on SQLite (a
      // transaction that reads first cannot take it once another process has committed). A chat
      // deleted since the request found it (while its tools connected) is gone for this turn too.
      if (!(await recordChatMessages(trx, turn.chatId, { added: 0, costUsd: 0, now })))
        throw errors.notFound('Chat');
      const removes = turn.removes ?? [];
      await deleteChatMessages(trx, turn.chatId, removes);
      const storedNow = await listChatMessageIds(trx, turn.workspaceId, turn.chatId);
      const rows = messageRows(turn.added.filter((message) => !storedNow.has(message.id)));
      await recordChatMessages(trx, turn.chatId, { added: rows.length, costUsd: 0, now });
      await appendMessages(trx, turn.chatId, rows);
      if (removes.length > 0) await recountChatMessages(trx, turn.chatId);
    }),
  );
}

/** A sub-agent run of a reply, and the model it ran on: the usage report counts it under both. */
export interface SubAgentRun {
  record: AgentRunTable;
  model: string;
}

/** What a reply stores when it has ended. */
export interface ReplyRecord {
  workspaceId: string;
  chatId: string;
  /**
   * An unstored reply on a chat the request named (its `chatId` is then one no chat has): the
   * chat whose spend its cost is added to, so unstored calls count toward its spend cap too.
   */
  spendChatId?: string;
  finishedAt: Date;
  /** The assistant message; undefined when the model failed (nothing to store but usage). */
  message?: {
    id: string;
    parts: unknown[];
    model: string;
    finishReason: string;
  };
  usage: { inputTokens: number; outputTokens: number; costUsd: number };
  /** Who the usage report counts the usage under when no message carries it (see storeReply). */
  reportAs: { agentId: string; model: string };
  /** Messages the reply replaces (regenerate); removed only when the reply is stored. */
  replaces: string[];
  subRuns: SubAgentRun[];
  /** Writes the caller adds to the same transaction (an agent run's record). */
  extraWrites?: (trx: Transaction<Database>) => Promise<void>;
}

/**
 * One transaction: the reply, the messages it replaces removed, the chat's spend, the month's
 * usage, sub-agent runs and the caller's writes. A chat deleted while its reply ran stays
 * deleted (the reply is dropped); the usage it caused is counted all the same. Returns the id
 * the reply's message is stored under, or undefined when none is.
 */
export async function storeReply(db: Db, record: ReplyRecord): Promise<string | undefined> {
  const now = record.finishedAt.toISOString();
  const { message, usage } = record;
  let storedId: string | undefined;
  await withConflictRetry(true, () =>
    db.transaction().execute(async (trx) => {
      storedId = undefined;
      const chatExists = await recordChatMessages(trx, record.chatId, {
        added: message ? 1 : 0,
        costUsd: usage.costUsd,
        now,
      });
      if (!chatExists && record.spendChatId !== undefined && usage.costUsd > 0) {
        await recordChatMessages(trx, record.spendChatId, { added: 0, costUsd: usage.costUsd, now });
      }
      const subAgentShare = sumRunUsage(record.subRuns);
      const messageStored = chatExists && message !== undefined;
      if (!messageStored && (usage.inputTokens > 0 || usage.outputTokens > 0)) {
        // No message carries this usage into the report's rollup (the messages trigger does
        // that): a failed or stopped reply, a call that named no chat, a chat deleted meanwhile.
        await addDailyUsage(trx, {
          workspaceId: record.workspaceId,
          date: now.slice(0, 10),
          agentId: record.reportAs.agentId,
          model: record.reportAs.model,
          inputTokens: usage.inputTokens - subAgentShare.inputTokens,
          outputTokens: usage.outputTokens - subAgentShare.outputTokens,
          costUsd: usage.costUsd - subAgentShare.costUsd,
        });
      }
      // The reply's usage includes its sub-agent runs'; the report counts each run under the
      // agent and model that spent it, whatever its outcome (a failed or cut-short run is charged
      // its estimate, reply-usage.ts); a run that spent nothing is not counted.
      for (const run of record.subRuns) {
        if (run.record.input_tokens === 0 && run.record.output_tokens === 0) continue;
        await addDailyUsage(trx, {
          workspaceId: record.workspaceId,
          date: now.slice(0, 10),
          agentId: run.record.agent_id,
          model: run.model,
          ...runUsage(run),
        });
      }
      if (chatExists && message) {
        // A client may have sent this reply's own id back while it ran (useChat resends the
        // partial reply it holds with the next turn; storeTurn stores it as a new message).
        // The reply takes the place of such a copy: same position, the whole text, its usage.
        // A message of another role under that id is not a copy: it stays, and the reply is
        // stored under an id of its own.
        const underId = await messageUnderId(trx, record.chatId, message.id);
        const copyAt = underId?.role === 'assistant' ? underId.position : undefined;
        const id = underId && copyAt === undefined ? newId('msg') : message.id;
        await deleteChatMessages(
          trx,
          record.chatId,
          copyAt === undefined ? record.replaces : [...record.replaces, message.id],
        );
        await appendMessages(
          trx,
          record.chatId,
          [
            {
              id,
              workspace_id: record.workspaceId,
              role: 'assistant',
              parts: JSON.stringify(message.parts),
              model: message.model,
              input_tokens: usage.inputTokens,
              output_tokens: usage.outputTokens,
              cost_usd: usage.costUsd,
              // Left out of the message's row in the report's rollup (counted per run above).
              sub_agent_input_tokens: subAgentShare.inputTokens,
              sub_agent_output_tokens: subAgentShare.outputTokens,
              sub_agent_cost_usd: subAgentShare.costUsd,
              finish_reason: message.finishReason,
              created_at: now,
            },
          ],
          copyAt,
        );
        if (record.replaces.length > 0 || copyAt !== undefined) await recountChatMessages(trx, record.chatId);
        storedId = id;
      }
      if (usage.inputTokens > 0 || usage.outputTokens > 0) {
        await addMonthUsage(trx, record.workspaceId, ledgerMonth(record.finishedAt), usage, now);
      }
      for (const run of record.subRuns) await insertAgentRun(trx, run.record);
      await record.extraWrites?.(trx);
    }),
  );
  return storedId;
}

function runUsage({ record }: SubAgentRun) {
  return { inputTokens: record.input_tokens, outputTokens: record.output_tokens, costUsd: record.cost_usd };
}

/** What a reply's sub-agent runs spent together. */
function sumRunUsage(runs: SubAgentRun[]) {
  const sum = { inputTokens: 0, outputTokens: 0, costUsd: 0 };
  for (const usage of runs.map(runUsage)) {
    sum.inputTokens += usage.inputTokens;
    sum.outputTokens += usage.outputTokens;
    sum.costUsd += usage.costUsd;
  }
  return sum;
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
