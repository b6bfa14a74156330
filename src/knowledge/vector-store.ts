import { type ExpressionBuilder, SqliteAdapter, sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { Database } from '../db/schema.js';

/**
 * Where chunk vectors are kept and searched (012-knowledge-vectors): a plain table on both
 * engines, searched by exact cosine distance within one project and one embedding model.
 * SQLite computes the distance with sqlite-vec's `vec_distance_cosine` (the extension loads
 * when the database opens, see database.ts); PostgreSQL with the `vector` extension's `<=>`.
 * Without either, vectors are `unavailable` and nothing here runs.
 */
export type VectorSupport =
  | { available: true; engine: 'sqlite' }
  /** `schema`: where the extension's type and operators live (quoted into the SQL). */
  | { available: true; engine: 'postgres'; schema: string }
  | { available: false; reason: string };

function isSqlite(db: Db): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * Whether this database can search vectors. SQLite: sqlite-vec answered `vec_version()` (it
 * does not load on musl, for one). PostgreSQL: the `vector` extension is installed, or is
 * available and this role may create it. Rejects when the database fails the check itself.
 */
export async function detectVectorSupport(db: Db): Promise<VectorSupport> {
  if (isSqlite(db)) {
    try {
      await sql`select vec_version() as version`.execute(db);
      return { available: true, engine: 'sqlite' };
    } catch (error) {
      // Only a missing function means the extension did not load; any other error is the
      // database failing the check, which says nothing of the extension (the caller asks again).
      if (!/no such function/i.test(error instanceof Error ? error.message : '')) throw error;
      return { available: false, reason: 'the sqlite-vec extension could not be loaded on this platform' };
    }
  }
  const installed = async () =>
    (
      await sql<{ schema: string }>`select n.nspname as schema from pg_extension e
        join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector'`.execute(db)
    ).rows[0]?.schema;
  let schema = await installed();
  if (!schema) {
    const offered = await sql<{ name: string }>`select name from pg_available_extensions
      where name = 'vector'`.execute(db);
    if (offered.rows.length === 0) {
      return { available: false, reason: 'PostgreSQL has no "vector" extension (pgvector) installed' };
    }
    try {
      await sql`create extension if not exists vector`.execute(db);
    } catch {
      return { available: false, reason: 'the "vector" extension exists but this role may not create it' };
    }
    schema = await installed();
  }
  return schema
    ? { available: true, engine: 'postgres', schema }
    : { available: false, reason: 'the "vector" extension could not be created' };
}

/** SQLite stores float32 little-endian bytes, which sqlite-vec reads as a vector. */
function sqliteVector(vector: number[]): Buffer {
  const floats = Float32Array.from(vector);
  return Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);
}

export interface ChunkToEmbed {
  id: number;
  projectId: string;
  text: string;
  heading: string | null;
}

/** A filter on `knowledge_chunks as c`: the chunk has no vector under `modelKey`. */
function lacksVector(modelKey: string) {
  return ({
    not,
    exists,
    selectFrom,
  }: ExpressionBuilder<Database & { c: Database['knowledge_chunks'] }, 'c'>) =>
    not(
      exists(
        selectFrom('knowledge_vectors as v')
          .select(sql`1`.as('one'))
          .whereRef('v.chunk_id', '=', 'c.id')
          .where('v.model_key', '=', modelKey),
      ),
    );
}

/**
 * Chunks of the workspace that have no vector under `modelKey`, oldest first. The anti-join
 * probes the vectors' (chunk_id, model_key) index once per chunk.
 */
export async function chunksLackingVectors(
  db: Db,
  workspaceId: string,
  modelKey: string,
  limit: number,
): Promise<ChunkToEmbed[]> {
  const rows = await db
    .selectFrom('knowledge_chunks as c')
    .select(['c.id', 'c.project_id', 'c.text', 'c.heading'])
    .where('c.workspace_id', '=', workspaceId)
    .where(lacksVector(modelKey))
    .orderBy('c.id')
    .limit(limit)
    .execute();
  return rows.map((row) => ({
    id: Number(row.id),
    projectId: row.project_id,
    text: row.text,
    heading: row.heading,
  }));
}

/** How many of the project's chunks have no vector under `modelKey`. */
export async function countChunksLackingVectors(
  db: Db,
  projectId: string,
  modelKey: string,
): Promise<number> {
  const row = await db
    .selectFrom('knowledge_chunks as c')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('c.project_id', '=', projectId)
    .where(lacksVector(modelKey))
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** Whether the project has any vector under `modelKey` (else a query embedding is wasted). */
export async function projectHasVectors(db: Db, projectId: string, modelKey: string): Promise<boolean> {
  const row = await db
    .selectFrom('knowledge_vectors')
    .select('chunk_id')
    .where('project_id', '=', projectId)
    .where('model_key', '=', modelKey)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Stores vectors of chunks. A chunk deleted meanwhile (its file replaced or deleted while the
 * provider answered) gets none: the insert checks it still exists, so the foreign key never
 * fails, and that it is still the chunk that was embedded (project, text, heading): SQLite hands
 * a deleted chunk's id to the next chunk inserted, maybe another project's, which must not get
 * this text's vector. A vector already there (another process was faster) is kept.
 */
export async function storeVectors(
  db: Db,
  modelKey: string,
  items: { chunk: ChunkToEmbed; vector: number[] }[],
): Promise<number> {
  const sqlite = isSqlite(db);
  let stored = 0;
  for (const { chunk, vector } of items) {
    const embedding = sqlite ? sqliteVector(vector) : sql`${vector}::real[]`;
    const result = await sql`insert into knowledge_vectors (model_key, chunk_id, project_id, embedding)
      select ${modelKey}, ${chunk.id}, ${chunk.projectId}, ${embedding}
      where exists (select 1 from knowledge_chunks where id = ${chunk.id}
        and project_id = ${chunk.projectId} and text = ${chunk.text}
        and coalesce(heading, '') = ${chunk.heading ?? ''})
      on conflict (model_key, chunk_id) do nothing`.execute(db);
    stored += Number(result.numAffectedRows ?? 0);
  }
  return stored;
}

/**
 * Removes up to `limit` vectors of the workspace's projects made by other models than
 * `modelKey` (a model changed: the old vectors are never read again). Returns how many went.
 */
export async function deleteStaleVectors(
  db: Db,
  workspaceId: string,
  modelKey: string | null,
  limit: number,
): Promise<number> {
  const stale = db
    .selectFrom('knowledge_vectors as v')
    .innerJoin('projects as p', 'p.id', 'v.project_id')
    .select(['v.model_key', 'v.chunk_id'])
    .where('p.workspace_id', '=', workspaceId)
    .$if(modelKey !== null, (qb) => qb.where('v.model_key', '<>', modelKey!))
    .limit(limit);
  const result = await sql`delete from knowledge_vectors
    where (model_key, chunk_id) in (${stale})`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

export interface VectorHit {
  chunkId: number;
  distance: number;
}

/** The project's chunks nearest to `vector` under `modelKey` (cosine distance, best first). */
export async function nearestChunks(
  db: Db,
  support: Extract<VectorSupport, { available: true }>,
  params: { projectId: string; modelKey: string; vector: number[]; limit: number },
): Promise<VectorHit[]> {
  if (support.engine === 'sqlite') {
    const rows = await sql<{ chunk_id: number; distance: number }>`
      select chunk_id, vec_distance_cosine(embedding, ${sqliteVector(params.vector)}) as distance
      from knowledge_vectors
      where project_id = ${params.projectId} and model_key = ${params.modelKey}
      order by distance, chunk_id
      limit ${params.limit}`.execute(db);
    return rows.rows.map((row) => ({ chunkId: Number(row.chunk_id), distance: Number(row.distance) }));
  }
  const schema = sql.raw(quoteIdent(support.schema));
  const rows = await sql<{ chunk_id: number; distance: number }>`
    select chunk_id,
      (embedding::${schema}.vector operator(${schema}.<=>) ${JSON.stringify(params.vector)}::${schema}.vector) as distance
    from knowledge_vectors
    where project_id = ${params.projectId} and model_key = ${params.modelKey}
    order by distance, chunk_id
    limit ${params.limit}`.execute(db);
  return rows.rows.map((row) => ({ chunkId: Number(row.chunk_id), distance: Number(row.distance) }));
}
