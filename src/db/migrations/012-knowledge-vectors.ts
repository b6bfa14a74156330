import { type Kysely, SqliteAdapter, sql } from 'kysely';

/**
 * Embeddings for project knowledge (knowledge.md, "Vector search"): model entries gain a
 * `kind` (existing ones are chat models), workspaces name their `embedding_model`, and chunk
 * vectors are kept per embedding model (`model_key`: the model id with the provider model it
 * runs, so redefining a model never mixes its vectors with the old ones).
 *
 * Vectors are stored in a plain table on both engines: a float32 blob on SQLite (searched with
 * sqlite-vec's `vec_distance_cosine` when the extension loads) and `real[]` on PostgreSQL (cast
 * to the `vector` type when that extension exists). So the schema never depends on an
 * extension: without one the table simply stays empty and search stays lexical.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;
  await db.schema
    .alterTable('models')
    .addColumn('kind', 'text', (c) => c.notNull().defaultTo('chat'))
    .execute();
  await db.schema.alterTable('workspaces').addColumn('embedding_model', 'text').execute();

  await db.schema
    .createTable('knowledge_vectors')
    .addColumn('model_key', 'text', (c) => c.notNull())
    .addColumn('chunk_id', 'bigint', (c) => c.notNull().references('knowledge_chunks.id').onDelete('cascade'))
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('embedding', sqlite ? 'blob' : sql`real[]`, (c) => c.notNull())
    .addPrimaryKeyConstraint('knowledge_vectors_pk', ['model_key', 'chunk_id'])
    .execute();
  await db.schema
    .createIndex('knowledge_vectors_project_idx')
    .on('knowledge_vectors')
    .columns(['project_id', 'model_key'])
    .execute();
  // The chunk side of "chunks lacking a vector": the anti-join probes this per chunk.
  await db.schema
    .createIndex('knowledge_vectors_chunk_idx')
    .on('knowledge_vectors')
    .columns(['chunk_id', 'model_key'])
    .execute();

  // One row per workspace: who embeds its chunks now (a lease, so two processes never pay the
  // provider twice for the same chunks), and how the last attempt went (retry with backoff).
  await db.schema
    .createTable('knowledge_embedding_state')
    .addColumn('workspace_id', 'text', (c) => c.primaryKey().references('workspaces.id').onDelete('cascade'))
    .addColumn('model_key', 'text', (c) => c.notNull())
    .addColumn('lease_owner', 'text')
    .addColumn('lease_until', 'text')
    .addColumn('failures', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'text')
    .addColumn('last_error', 'text')
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('knowledge_embedding_state').execute();
  await db.schema.dropTable('knowledge_vectors').execute();
  await db.schema.alterTable('workspaces').dropColumn('embedding_model').execute();
  await db.schema.alterTable('models').dropColumn('kind').execute();
}
