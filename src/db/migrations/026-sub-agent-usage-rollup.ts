import { type Kysely, SqliteAdapter, sql } from 'kysely';

/**
 * The usage report counts a sub-agent run under the sub-agent and the model it ran on
 * (management.md: `byAgent`, `byModel`), not under the lead reply whose message carries its
 * usage. The message keeps its whole usage (docs/chat.md: a reply's usage includes its
 * sub-agent calls) and records the sub-agents' share of it, which the rollup trigger leaves out;
 * the reply's store adds each run to the rollup under its own agent and model.
 *
 * Existing messages record no share (0): what their sub-agents spent stays under the lead, as
 * reported until now, so no total changes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  for (const column of ['sub_agent_input_tokens', 'sub_agent_output_tokens'])
    await db.schema
      .alterTable('messages')
      .addColumn(column, 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
  await db.schema
    .alterTable('messages')
    .addColumn('sub_agent_cost_usd', 'double precision', (c) => c.notNull().defaultTo(0))
    .execute();
  await replaceRollupTrigger(db, LEAD_SHARE);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await replaceRollupTrigger(db, WHOLE_MESSAGE);
  for (const column of ['sub_agent_cost_usd', 'sub_agent_output_tokens', 'sub_agent_input_tokens'])
    await db.schema.alterTable('messages').dropColumn(column).execute();
}

/** The trigger of 010-management: the message's whole usage under the chat's agent. */
const WHOLE_MESSAGE = sql`NEW.input_tokens, NEW.output_tokens, NEW.cost_usd`;
/** The reply's own share: its usage less what its sub-agent runs spent. */
const LEAD_SHARE = sql`NEW.input_tokens - NEW.sub_agent_input_tokens, NEW.output_tokens - NEW.sub_agent_output_tokens,
        NEW.cost_usd - NEW.sub_agent_cost_usd`;

async function replaceRollupTrigger(db: Kysely<unknown>, usage: typeof LEAD_SHARE): Promise<void> {
  const upsert = sql`insert into usage_daily (workspace_id, date, agent_id, model, input_tokens, output_tokens, cost_usd, requests)
      select NEW.workspace_id, substr(NEW.created_at, 1, 10), c.agent_id, NEW.model, ${usage}, 1
      from chats c where c.id = NEW.chat_id
      on conflict (workspace_id, date, agent_id, model) do update set
        input_tokens = usage_daily.input_tokens + excluded.input_tokens,
        output_tokens = usage_daily.output_tokens + excluded.output_tokens,
        cost_usd = usage_daily.cost_usd + excluded.cost_usd,
        requests = usage_daily.requests + 1`;
  if (db.getExecutor().adapter instanceof SqliteAdapter) {
    // SQLite has no CREATE OR REPLACE TRIGGER.
    await sql`drop trigger messages_usage_rollup`.execute(db);
    await sql`create trigger messages_usage_rollup after insert on messages
      when NEW.role = 'assistant' and NEW.model is not null
      begin ${upsert}; end`.execute(db);
  } else {
    // The trigger calls the function by name; replacing its body is enough.
    await sql`create or replace function messages_usage_rollup() returns trigger language plpgsql as $$
      begin ${upsert}; return NEW; end $$`.execute(db);
  }
}
