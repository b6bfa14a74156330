import type { Db } from '../db/database.js';
import { indexSummaryCounts, markProjectForReindex } from '../db/repositories/knowledge.js';
import { findProject } from '../db/repositories/projects.js';
import type { IndexStatus } from '../db/schema.js';
import { errors } from '../errors.js';
import { notifyIndexWork } from '../knowledge/indexer.js';
import { type SearchResult, searchProject } from '../knowledge/search.js';

/** Whether vectors back search, per spec/knowledge.md; see {@link vectorState}. */
export type VectorState = 'ready' | 'building' | 'off' | 'unavailable';

/**
 * The vector part of a project's index summary. Lexical search needs no model, so without
 * embeddings (the case until the embedding part lands) vectors are `off` and no model is named.
 * The one place the embedding part replaces.
 */
export async function vectorState(
  _db: Db,
  _project: { workspaceId: string; projectId: string },
): Promise<{ embeddingModel: string | null; vectors: VectorState }> {
  return { embeddingModel: null, vectors: 'off' };
}

export interface IndexSummary {
  files: Record<IndexStatus, number>;
  chunks: number;
  embeddingModel: string | null;
  vectors: VectorState;
}

async function requireProject(db: Db, workspaceId: string, projectId: string) {
  const project = await findProject(db, workspaceId, projectId);
  if (!project) throw errors.notFound('Project');
  return project;
}

/** `GET /v1/projects/{projectId}/index`. */
export async function projectIndexSummary(
  db: Db,
  workspaceId: string,
  projectId: string,
): Promise<IndexSummary> {
  await requireProject(db, workspaceId, projectId);
  const [counts, vectors] = await Promise.all([
    indexSummaryCounts(db, workspaceId, projectId),
    vectorState(db, { workspaceId, projectId }),
  ]);
  return { ...counts, ...vectors };
}

/**
 * `POST /v1/projects/{projectId}/index/rebuild`: every file of the project is indexed again.
 * Chunks already indexed stay searchable until each file's new ones replace them.
 */
export async function rebuildProjectIndex(db: Db, workspaceId: string, projectId: string) {
  await requireProject(db, workspaceId, projectId);
  const files = await markProjectForReindex(db, workspaceId, projectId);
  if (files > 0) notifyIndexWork();
  return { files };
}

/** `GET /v1/projects/{projectId}/search`: the caller's workspace must hold the project. */
export async function searchProjectFiles(
  db: Db,
  workspaceId: string,
  projectId: string,
  query: { q: string; limit: number },
): Promise<SearchResult[]> {
  await requireProject(db, workspaceId, projectId);
  return searchProject(db, { workspaceId, projectId, query: query.q, limit: query.limit });
}
