import { changeSignalsOf } from '../db/change-signals.js';
import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { isSqliteDb, sqliteProjectToken } from '../db/repositories/knowledge.js';
import { PG_SEARCH_CONFIG, searchableText } from './fold.js';
import { type ChunkCandidate, withVectorCandidates } from './vectors.js';

/** One search hit: a chunk of an indexed file (spec/knowledge.md "Search"). */
export interface SearchResult {
  fileId: string;
  path: string;
  name: string;
  /** The matching chunk. */
  text: string;
  /** Higher is better; comparable within one search only. */
  score: number;
  heading: string | null;
  pages: number[] | null;
}

export interface SearchParams {
  projectId: string;
  /** Given by callers that have not checked the project's workspace themselves. */
  workspaceId?: string;
  query: string;
  limit: number;
  /** At most this many chunks of one file (default 3), so one long file cannot fill the list. */
  perFile?: number;
}

/** Query terms used at most: a 1,000-character question has far fewer that matter. */
const MAX_TERMS = 32;
/** A term found in more than this share of chunks says little and costs the most: dropped. */
const COMMON_SHARE = 0.5;
/**
 * Chunks one search ranks at most. Ranking costs per matching chunk (about 2 µs with FTS5, 10–20 µs
 * on PostgreSQL, which reads each chunk's tsvector), so a term found in tens of thousands of
 * chunks would cost a turn hundreds of milliseconds: terms are taken rarest first while their
 * chunks fit the budget, and when even the rarest term alone is past it, only its newest matches
 * are ranked (bench/knowledge.bench.ts).
 */
const RANK_BUDGET = { sqlite: 2_000, postgres: 1_000 };
/** Candidates read per result wanted (for fusion with vector search: vectors.ts). */
const CANDIDATES_PER_RESULT = 4;
/** Chunks of one file a search answers at most, unless the caller says otherwise. */
const DEFAULT_PER_FILE = 3;

/**
 * English words too common to find anything by; neither engine's tokenizer drops them (SQLite's
 * `unicode61`, PostgreSQL's `simple`), so queries leave them out here.
 */
const STOP_WORDS = new Set(
  `a about above after again against all am an and any are as at be because been before being
  below between both but by can could did do does doing down during each few for from further had
  has have having he her here hers herself him himself his how i if in into is it its itself just
  me more most my myself no nor not now of off on once only or other our ours ourselves out over
  own same she should so some such than that the their theirs them themselves then there these
  they this those through to too under until up very was we were what when where which while who
  whom why will with would you your yours yourself yourselves s t don doesn isn aren wasn weren
  won can't cannot shall may might must also`.split(/\s+/),
);

/**
 * The words of a query as both engines' indexes hold them: made searchable as chunks are
 * ({@link searchableText}: lower-cased, accents folded, split at anything that is not a letter
 * or digit). Only letters and digits remain, so nothing of the user's input can be read as
 * query syntax by FTS5 or `to_tsquery`.
 */
export function queryTerms(query: string): string[] {
  const words = searchableText(query).match(/[\p{L}\p{N}]+/gu);
  const terms = new Set<string>();
  for (const word of words ?? []) {
    if (STOP_WORDS.has(word)) continue;
    // One letter says little, but one Chinese character is often a whole word (猫, 书).
    if (word.length < 2 && !/[\p{N}\p{Script=Han}]/u.test(word)) continue;
    terms.add(word);
    if (terms.size >= MAX_TERMS) break;
  }
  return [...terms];
}

/**
 * Keeps the terms worth searching: those found in the index at all, without the ones in most
 * chunks, rarest first while their document frequencies add up to at most `budget`
 * (a rarer term always says more about a chunk than a commoner one). The rarest term found is
 * always kept, so a search of common words still answers.
 */
export function selectTerms(
  frequencies: Map<string, number>,
  terms: string[],
  totalChunks: number,
  budget: number,
): string[] {
  if (totalChunks <= 0) return [];
  const found = terms
    .filter((term) => (frequencies.get(term) ?? 0) > 0)
    .sort((a, b) => frequencies.get(a)! - frequencies.get(b)!);
  const kept: string[] = [];
  let matches = 0;
  for (const term of found) {
    const frequency = frequencies.get(term)!;
    if (kept.length > 0 && (frequency > totalChunks * COMMON_SHARE || matches + frequency > budget)) break;
    kept.push(term);
    matches += frequency;
  }
  return kept;
}

type Candidate = ChunkCandidate;

/**
 * Lexical search of a project's indexed chunks: an OR of the query's terms (an implicit AND
 * finds nothing once a question has a word the passage lacks), best first — bm25 on SQLite
 * FTS5, `ts_rank_cd` on PostgreSQL — with at most `perFile` chunks of any one file. The cap is
 * applied while ranking, so a long file holding every best chunk does not crowd the other files'
 * matches out of the candidates; it is applied again after fusion with vector candidates.
 * The caller checks that the project is visible to the caller.
 */
export async function searchProject(db: Db, params: SearchParams): Promise<SearchResult[]> {
  if (params.limit <= 0) return [];
  const terms = queryTerms(params.query);
  const candidateLimit = params.limit * CANDIDATES_PER_RESULT;
  const perFile = params.perFile ?? DEFAULT_PER_FILE;
  // A query of stop words only ('who are we') has no lexical terms, but its vector may still
  // find passages: the vector search runs either way.
  const lexical =
    terms.length === 0
      ? []
      : isSqliteDb(db)
        ? await searchSqlite(db, params, terms, candidateLimit, perFile)
        : await searchPostgres(db, params, terms, candidateLimit, perFile);
  // Hybrid when the project has vectors (reciprocal-rank fusion, vectors.ts); else lexical as is.
  const candidates = await withVectorCandidates(db, params, lexical, candidateLimit);
  const taken = new Map<string, number>();
  const results: SearchResult[] = [];
  for (const row of candidates) {
    const count = taken.get(row.file_id) ?? 0;
    if (count >= perFile) continue;
    taken.set(row.file_id, count + 1);
    results.push({
      fileId: row.file_id,
      path: row.path,
      name: row.name,
      text: row.text,
      score: Number(row.score),
      heading: row.heading,
      pages: row.pages ? (JSON.parse(row.pages) as number[]) : null,
    });
    if (results.length >= params.limit) break;
  }
  return results;
}

// ---------------------------------------------------------------------------------------------
// Term statistics, per project on both engines

/**
 * A term's document frequency is counted among the project's chunks, stopping at the budget:
 * past it, the exact number changes nothing (the term is left out, or ranked on its newest
 * matches), and counting a term in most chunks to the end costs milliseconds. Only the project's
 * own chunks count: a frequency over every project would let a search tell which words other
 * tenants' files hold (a term found only there would be kept as the rarest, and a term common
 * only there dropped, with the caller's own matches). Terms past the budget, and a large chunk
 * count, are kept per process and project for a minute; rarer ones are counted each time, so a
 * newly indexed file's words are found at once.
 */
const STATS_CACHE_TTL_MS = 60_000;
const TERM_CACHE_MAX = 10_000;
const termCache = new WeakMap<object, Map<string, { doc: number; at: number }>>();
const CHUNK_COUNT_CACHE_MIN = 5_000;
const CHUNK_COUNT_CACHE_MAX = 10_000;
const chunkCountCache = new WeakMap<object, Map<string, { total: number; at: number }>>();

/**
 * Document frequencies (at most budget + 1) against the number of chunks, in one project;
 * `countTerms` counts each term's chunks in the project, stopping at `cap` (in the terms' order).
 */
async function projectTermStats(
  db: Db,
  projectId: string,
  terms: string[],
  budget: number,
  countTerms: (terms: string[], cap: number) => Promise<number[]>,
) {
  let cache = termCache.get(db);
  if (!cache) {
    termCache.set(db, (cache = new Map()));
    forgetOnChunkWrites(db);
  }
  const now = Date.now();
  const frequencies = new Map<string, number>();
  const cap = budget + 1;
  const uncached: string[] = [];
  for (const term of terms) {
    const cached = cache.get(`${projectId}\0${term}`);
    if (cached && now - cached.at < STATS_CACHE_TTL_MS) frequencies.set(term, cached.doc);
    else uncached.push(term);
  }
  const docs = uncached.length > 0 ? await countTerms(uncached, cap) : [];
  uncached.forEach((term, i) => {
    const doc = docs[i] ?? 0;
    frequencies.set(term, doc);
    if (doc >= cap) {
      if (cache.size > TERM_CACHE_MAX) cache.clear();
      cache.set(`${projectId}\0${term}`, { doc, at: now });
    }
  });
  let counts = chunkCountCache.get(db);
  if (!counts) chunkCountCache.set(db, (counts = new Map()));
  const count = counts.get(projectId);
  let total = count && now - count.at < STATS_CACHE_TTL_MS ? count.total : undefined;
  if (total === undefined) {
    const result = await sql<{ n: number }>`select count(*) as n from knowledge_chunks
      where project_id = ${projectId}`.execute(db);
    total = Number(result.rows[0]?.n ?? 0);
    if (total >= CHUNK_COUNT_CACHE_MIN) {
      if (counts.size > CHUNK_COUNT_CACHE_MAX) counts.clear();
      counts.set(projectId, { total, at: now });
    }
  }
  return { frequencies, total };
}

/**
 * A term cached as past the budget would stay dropped from queries for up to the cache's minute
 * after its chunks were deleted or replaced: the caches are forgotten at every write this process
 * makes to the chunks or to a table whose deletes cascade into them (deleting a file or a project
 * removes its chunks by the foreign key, with no write naming them). Other processes' writes are
 * not told: `knowledge_chunks` has no change trigger (its writes make no writer wait, see
 * src/db/pg-change-signals.ts), and on SQLite nothing here reads data_version; there the counts
 * are at most the cache's minute old.
 */
function forgetOnChunkWrites(db: Db): void {
  changeSignalsOf(db as never)?.onWrite((tables) => {
    if (tables === 'unknown' || CHUNK_SOURCES.some((table) => tables.has(table))) forgetSearchStatistics(db);
  });
}

/** The chunks, and the tables whose deletes cascade into them. */
const CHUNK_SOURCES = ['knowledge_chunks', 'project_files', 'projects', 'workspaces', 'organizations'];

/** Forgets the cached counts (benchmarks and tests that load chunks mid-run). */
export function forgetSearchStatistics(db: Db): void {
  termCache.delete(db);
  chunkCountCache.delete(db);
}

// ---------------------------------------------------------------------------------------------
// SQLite: FTS5

/**
 * An FTS5 query for `words` (an FTS5 expression over the chunk's own columns) among one
 * project's chunks only: ANDed with the project's token in the `scope` column (migration 027),
 * FTS5 steps through the project's doclist and the words' doclists together, seeking past other
 * tenants' rows instead of visiting each one. Work so follows the project's own chunks, however
 * many matches other tenants hold, and wherever their chunks' ids lie among the project's.
 */
export function sqliteProjectMatch(projectId: string, words: string): string {
  return `scope : "${sqliteProjectToken(projectId)}" AND {heading text} : (${words})`;
}

async function searchSqlite(
  db: Db,
  params: SearchParams,
  terms: string[],
  limit: number,
  perFile: number,
): Promise<Candidate[]> {
  const stats = await projectTermStats(
    db,
    params.projectId,
    terms,
    RANK_BUDGET.sqlite,
    async (uncounted, cap) => {
      const docs: number[] = [];
      for (const term of uncounted) {
        const result = await sqliteTermCount(params.projectId, term, cap).execute(db);
        docs.push(Number(result.rows[0]?.doc ?? 0));
      }
      return docs;
    },
  );
  const kept = selectTerms(stats.frequencies, terms, stats.total, RANK_BUDGET.sqlite);
  if (kept.length === 0) return [];
  // Every term quoted: a string of letters and digits in double quotes is always one token.
  const match = sqliteProjectMatch(params.projectId, kept.map((term) => `"${term}"`).join(' OR '));
  const workspace = params.workspaceId ? sql`and s.workspace_id = ${params.workspaceId}` : sql``;
  // Ranked first on ids alone (the project checked again, and the file read, in the narrow
  // knowledge_chunks_scope_idx), at most the budget of the newest matches, at most `perFile` of
  // each file; the text is read for the best `limit` only. bm25 is lower for better matches;
  // headings weigh twice the body, the project's token nothing.
  const result = await sql<Candidate>`
    select c.file_id, f.path, f.name, c.text, c.heading, c.pages, ranked.score
    from (
      select id, score from (
        select id, score, row_number() over (partition by file_id order by score desc, id) as nth
        from (${sqliteRankedMatches(params.projectId, match, workspace)}))
      where nth <= ${perFile}
      order by score desc, id
      limit ${limit}) ranked
    join knowledge_chunks c on c.id = ranked.id
    join project_files f on f.id = c.file_id
    order by ranked.score desc, c.id`.execute(db);
  return result.rows;
}

/** How many of a project's chunks (at most `cap`) hold `term`: the full-text index alone. */
export function sqliteTermCount(projectId: string, term: string, cap: number) {
  return sql<{ doc: number }>`select count(*) as doc from (
      select 1 from knowledge_chunks_fts
      where knowledge_chunks_fts match ${sqliteProjectMatch(projectId, `"${term}"`)}
      limit ${cap})`;
}

/**
 * The newest RANK_BUDGET matches of `match` (a {@link sqliteProjectMatch}), with their files and
 * bm25 scores. CROSS JOIN makes SQLite read the full-text index first: its planner may otherwise
 * walk the project's chunks by id and run the MATCH once per chunk (10,000 chunks: 400 ms a
 * search instead of 2; test/knowledge/search-plan).
 */
export function sqliteRankedMatches(
  projectId: string,
  match: string,
  workspace: RawBuilder<unknown> = sql``,
) {
  return sql<{ id: number; file_id: string; score: number }>`
    select knowledge_chunks_fts.rowid as id, s.file_id, -bm25(knowledge_chunks_fts, 2.0, 1.0, 0.0) as score
    from knowledge_chunks_fts
    cross join knowledge_chunks s on s.id = knowledge_chunks_fts.rowid
    where knowledge_chunks_fts match ${match}
      and s.project_id = ${projectId} ${workspace}
    order by knowledge_chunks_fts.rowid desc
    limit ${RANK_BUDGET.sqlite}`;
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL: tsvector

/** The terms as PostgreSQL's configuration makes them lexemes (with `simple`: the same words). */
async function postgresLexemes(db: Db, terms: string[]): Promise<string[]> {
  const result = await sql<{ lexeme: string }>`
    select distinct unnest(tsvector_to_array(to_tsvector(${PG_SEARCH_CONFIG}::regconfig, ${terms.join(' ')}))) as lexeme`.execute(
    db,
  );
  return result.rows.map((row) => row.lexeme);
}

/**
 * How many of a project's chunks (at most `cap`) hold each of `lexemes`, in their order: one
 * statement for all of them, as a round trip per word cost a small project's search more than
 * its counting.
 */
function postgresLexemeCounts(projectId: string, lexemes: string[], cap: number) {
  return sql<{ doc: number }>`select (select count(*) from (
        select 1 from knowledge_chunks
        where project_id = ${projectId} and tsv @@ to_tsquery('simple', l.query)
        limit ${cap}) m) as doc
      from unnest(${lexemes.map(quotedLexeme)}::text[]) with ordinality as l(query, n)
      order by l.n`;
}

/** Lexemes of letters and digits only, quoted; `simple` keeps them as they are (already stemmed). */
function quotedLexeme(lexeme: string): string {
  return `'${lexeme.replaceAll("'", "''")}'`;
}

async function searchPostgres(
  db: Db,
  params: SearchParams,
  terms: string[],
  limit: number,
  perFile: number,
): Promise<Candidate[]> {
  const lexemes = await postgresLexemes(db, terms);
  // Counted in the project, as on SQLite: never from table-wide statistics (pg_stats), which
  // would drop a word common in another tenant's files, and count a word ANALYZE has not seen
  // yet as rare, ranking all of its matches.
  const stats = await projectTermStats(
    db,
    params.projectId,
    lexemes,
    RANK_BUDGET.postgres,
    async (uncounted, cap) => {
      const result = await postgresLexemeCounts(params.projectId, uncounted, cap).execute(db);
      return result.rows.map((row) => Number(row.doc));
    },
  );
  const chosen = selectTerms(stats.frequencies, lexemes, stats.total, RANK_BUDGET.postgres);
  if (chosen.length === 0) return [];
  const tsquery = chosen.map(quotedLexeme).join(' | ');
  const workspace = params.workspaceId ? sql`and c.workspace_id = ${params.workspaceId}` : sql``;
  const matches = chosen.reduce((sum, lexeme) => sum + stats.frequencies.get(lexeme)!, 0);
  // Past the budget, only the newest matches are ranked (for a term in most chunks, walking the
  // primary key backwards stops once it has them); else every match, found through the GIN index.
  // Ranking reads ids and tsvectors only, keeping at most `perFile` chunks of each file; the text
  // (about 1.5 KB a chunk) is read for the winners.
  const matching =
    matches > RANK_BUDGET.postgres
      ? sql`(select c.id, c.file_id, c.tsv from knowledge_chunks c, to_tsquery('simple', ${tsquery}) q
          where c.project_id = ${params.projectId} ${workspace} and c.tsv @@ q
          order by c.id desc limit ${RANK_BUDGET.postgres})`
      : sql`(select c.id, c.file_id, c.tsv from knowledge_chunks c, to_tsquery('simple', ${tsquery}) q
          where c.project_id = ${params.projectId} ${workspace} and c.tsv @@ q)`;
  const result = await sql<Candidate>`
    select r.file_id, f.path, f.name, c.text, c.heading, c.pages, r.score
    from (
      select id, file_id, score from (
        select id, file_id, score,
          row_number() over (partition by file_id order by score desc, id) as nth
        from (
          select m.id, m.file_id, ts_rank_cd(m.tsv, q) as score
          from ${matching} m, to_tsquery('simple', ${tsquery}) q
        ) scored
      ) ranked
      where nth <= ${perFile}
      order by score desc, id
      limit ${limit}
    ) r
    join knowledge_chunks c on c.id = r.id
    join project_files f on f.id = r.file_id
    order by r.score desc, r.id`.execute(db);
  return result.rows;
}
