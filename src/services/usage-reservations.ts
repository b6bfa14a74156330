import { type Insertable, sql } from 'kysely';
import { type Db, type Dialect, dialectOf } from '../db/database.js';
import { findMonthUsage } from '../db/repositories/usage.js';
import type { UsageReservationTable, WorkspaceTable } from '../db/schema.js';
import { ApiError } from '../errors.js';
import { type Clock, newId } from '../ids.js';
import { renewWhileWorking } from '../lease-renewal.js';
import { costUsd, type Pricing, shownUsd } from '../models/registry.js';
import { ledgerMonth } from './usage.js';
import { estimatePromptTokens } from './usage-estimate.js';

/**
 * Output tokens promised to each request before it runs (its input is estimated from the
 * prompt). Near a limit, requests in flight hold this much of what is left, so the next ones
 * are refused until they settle; far from it, the reservation is noise.
 */
export const RESERVED_OUTPUT_TOKENS = 1024;
/**
 * A reservation stops counting this long after its process last vouched for it; the process
 * renews its reservations every third of it while it runs. Kept short: a killed process's
 * reservations (SIGKILL, out of memory, a lost machine) count against the workspace's limits
 * this long at most, refusing its requests meanwhile when it is near a limit.
 */
export const USAGE_RESERVATION_TTL_MS = 30_000;

export interface UsageEstimate {
  tokens: number;
  costUsd: number;
}

/** What one model request is expected to use at most: its prompt, and the output allowance. */
export function estimateRequestUsage(
  pricing: Pricing,
  prompt: { system: string | undefined; messages: unknown },
): UsageEstimate {
  const inputTokens = estimatePromptTokens(prompt);
  return {
    tokens: inputTokens + RESERVED_OUTPUT_TOKENS,
    costUsd: costUsd(pricing, inputTokens, RESERVED_OUTPUT_TOKENS),
  };
}

export interface Reservation {
  /** Stops counting it (after the request's real usage is stored). Never throws. */
  release(): Promise<void>;
}

type LimitedWorkspace = Pick<
  WorkspaceTable,
  'id' | 'monthly_tokens' | 'monthly_cost_usd' | 'chat_spend_cap_usd'
>;

/**
 * Usage limits that hold under concurrency and across processes. A request is admitted only
 * if what is spent plus what requests in flight have reserved (in the database, seen by every
 * process) is still under each limit; it then reserves its own estimate until it settles.
 * Admissions of one workspace run one at a time (a row lock on PostgreSQL, the write lock on
 * SQLite), so two requests never both take the last of a budget. When every request stays
 * within its estimate, the spend passes a limit by at most one request's usage in total.
 */
export class UsageReservations {
  /** Marks this process's reservations, so it can keep them alive while it runs. */
  readonly processId = newId('prc');
  /** The reservations of this process's requests in flight, as inserted. */
  private readonly held = new Map<string, Insertable<UsageReservationTable>>();
  private stopRenewing: (() => void) | undefined;
  private readonly ttlMs: number;

  private readonly dialect: Dialect;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    options: { ttlMs?: number } = {},
  ) {
    this.dialect = dialectOf(db);
    this.ttlMs = options.ttlMs ?? USAGE_RESERVATION_TTL_MS;
  }

  /** Keeps this process's reservations from expiring while it runs. */
  start(): void {
    // A failed renewal is tried again a third of the expiry later; two may fail in a row.
    this.stopRenewing ??= renewWhileWorking({
      everyMs: Math.floor(this.ttlMs / 3),
      renew: async () => {
        await this.extend();
        return true;
      },
    });
  }

  async stop(): Promise<void> {
    this.stopRenewing?.();
    this.stopRenewing = undefined;
  }

  /**
   * Moves the expiry of this process's reservations on. One found gone (this process stalled,
   * or the database was out of reach, past its expiry, and another process's admission cleared
   * it away) is put back: its request still runs, and what it spends must still count.
   */
  private async extend(): Promise<void> {
    if (this.held.size === 0) return;
    const expiresAt = new Date(this.clock().getTime() + this.ttlMs).toISOString();
    const ids = [...this.held.keys()];
    const result = await this.db
      .updateTable('usage_reservations')
      .set({ expires_at: expiresAt })
      .where('process_id', '=', this.processId)
      .where('id', 'in', ids)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === ids.length) return;
    const present = new Set(
      (await this.db.selectFrom('usage_reservations').select('id').where('id', 'in', ids).execute()).map(
        (row) => row.id,
      ),
    );
    // Not those released meanwhile: they are settled, their usage in the ledger.
    const missing = ids.flatMap((id) => {
      const row = this.held.get(id);
      return row && !present.has(id) ? [{ ...row, expires_at: expiresAt }] : [];
    });
    if (missing.length === 0) return;
    await this.db
      .insertInto('usage_reservations')
      .values(missing)
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
  }

  /**
   * Admits a request against the workspace's monthly limits and, on an existing chat, its
   * spend cap, counting what requests in flight have reserved; throws 402 like the plain
   * checks. Returns undefined when no limit applies (nothing is reserved then).
   */
  async admit(input: {
    workspace: LimitedWorkspace;
    chatId: string | undefined;
    /** Called only when a limit applies (it measures the whole prompt). */
    estimate: () => UsageEstimate;
  }): Promise<Reservation | undefined> {
    const { workspace, chatId } = input;
    const cap = chatId ? workspace.chat_spend_cap_usd : null;
    if (workspace.monthly_tokens === null && workspace.monthly_cost_usd === null && cap === null) {
      return undefined;
    }
    const estimate = input.estimate();
    const id = newId('rsv');
    const now = this.clock();
    const nowIso = now.toISOString();
    const reservation = {
      id,
      workspace_id: workspace.id,
      chat_id: chatId ?? null,
      process_id: this.processId,
      tokens: estimate.tokens,
      cost_usd: estimate.costUsd,
      created_at: nowIso,
      expires_at: new Date(now.getTime() + this.ttlMs).toISOString(),
    };
    await this.db.transaction().execute(async (trx) => {
      // One admission per workspace at a time. On SQLite the insert below, as the first
      // statement, takes the database's write lock for the same effect.
      if (this.dialect === 'postgres') {
        await sql`select id from workspaces where id = ${workspace.id} for update`.execute(trx);
      }
      await trx.insertInto('usage_reservations').values(reservation).execute();
      // Reservations of processes that died stop counting once expired; clear them away.
      await trx
        .deleteFrom('usage_reservations')
        .where('workspace_id', '=', workspace.id)
        .where('expires_at', '<=', nowIso)
        .execute();
      const others = (scope: 'workspace' | 'chat') =>
        trx
          .selectFrom('usage_reservations')
          .select((eb) => [
            eb.fn.sum<number>('tokens').as('tokens'),
            eb.fn.sum<number>('cost_usd').as('cost'),
          ])
          .where(
            scope === 'chat' ? 'chat_id' : 'workspace_id',
            '=',
            scope === 'chat' ? chatId! : workspace.id,
          )
          .where('id', '!=', id)
          .executeTakeFirst()
          .then((row) => ({ tokens: Number(row?.tokens ?? 0), costUsd: Number(row?.cost ?? 0) }));

      if (workspace.monthly_tokens !== null || workspace.monthly_cost_usd !== null) {
        const month = ledgerMonth(now);
        const [used, reserved] = await Promise.all([
          findMonthUsage(trx, workspace.id, month),
          others('workspace'),
        ]);
        const usedTokens = used.inputTokens + used.outputTokens;
        if (workspace.monthly_tokens !== null && usedTokens + reserved.tokens >= workspace.monthly_tokens) {
          throw new ApiError(
            'usage_limit_exceeded',
            'The workspace has reached its monthly token limit (counting requests in progress)',
            { month, limitTokens: workspace.monthly_tokens, usedTokens, reservedTokens: reserved.tokens },
          );
        }
        if (
          workspace.monthly_cost_usd !== null &&
          used.costUsd + reserved.costUsd >= workspace.monthly_cost_usd
        ) {
          throw new ApiError(
            'usage_limit_exceeded',
            'The workspace has reached its monthly cost limit (counting requests in progress)',
            {
              month,
              limitUsd: workspace.monthly_cost_usd,
              usedUsd: shownUsd(used.costUsd),
              reservedUsd: shownUsd(reserved.costUsd),
            },
          );
        }
      }
      if (cap !== null && chatId) {
        const [chat, reserved] = await Promise.all([
          trx.selectFrom('chats').select('spend_usd').where('id', '=', chatId).executeTakeFirst(),
          others('chat'),
        ]);
        const spent = Number(chat?.spend_usd ?? 0);
        if (spent + reserved.costUsd >= cap) {
          throw new ApiError(
            'spend_cap_exceeded',
            'The chat has reached its spend cap (counting requests in progress)',
            {
              chatId,
              capUsd: cap,
              spentUsd: shownUsd(spent),
              reservedUsd: shownUsd(reserved.costUsd),
            },
          );
        }
      }
    });
    this.held.set(id, reservation);
    return {
      release: async () => {
        this.held.delete(id);
        await this.db
          .deleteFrom('usage_reservations')
          .where('id', '=', id)
          .execute()
          .catch(() => {
            // Left behind, it expires with the other reservations of this process.
          });
      },
    };
  }
}
