import type { Db } from '../db/database.js';
import { indexedTextSize, listIndexedTexts } from '../db/repositories/knowledge.js';
import {
  countProjectFiles,
  fileMediaTypes,
  listProjectFilesByPath,
  type ProjectFileListing,
  type ProjectScope,
} from '../db/repositories/knowledge-turns.js';
import type { ExcerptInContext, FileInContext } from '../models/context.js';
import { searchProject } from './search.js';

/** Limits of what one turn gives the model of a project's files (spec/knowledge.md, "Each turn"). */
export interface TurnLimits {
  /** Characters of excerpt text per turn, all excerpts together. */
  excerptChars: number;
  /** Excerpts of one file at most, so one long file cannot crowd out the others. */
  excerptsPerFile: number;
  /** A project whose indexed text fits in this many characters is given whole. */
  wholeProjectChars: number;
  /** File names the listing shows at most. */
  listedFiles: number;
  /** Search results considered when choosing excerpts. */
  candidates: number;
}

export const TURN_LIMITS: TurnLimits = {
  excerptChars: 16_000,
  excerptsPerFile: 3,
  wholeProjectChars: 24_000,
  listedFiles: 100,
  candidates: 24,
};

/** More files than a project may hold (500): the whole listing. */
const EVERY_FILE = 1_000;

/** A passage the model was given, as the reply cites it: `[n]`. */
export interface TurnSource {
  n: number;
  fileId: string;
  path: string;
  name: string;
  mediaType: string;
  heading: string | null;
  pages: number[] | null;
}

/** What a turn gives the model of its project's files. */
export interface TurnKnowledge {
  /** The listing, in path order; with whole texts (numbered) in a small project. */
  files: FileInContext[];
  /** Files the listing leaves out. */
  unlisted: number;
  excerpts: ExcerptInContext[];
  /** One per numbered text given (excerpt or whole file), in number order. */
  sources: TurnSource[];
}

/** Why a listed file has no text in the prompt. */
function statusNote(file: ProjectFileListing): string | undefined {
  switch (file.indexStatus) {
    case 'indexed':
      return undefined;
    case 'pending':
    case 'indexing':
      return 'being indexed';
    case 'unsupported':
      return 'no text';
    default:
      return 'could not be indexed';
  }
}

function listed(file: ProjectFileListing): FileInContext {
  const note = statusNote(file);
  return {
    path: file.path,
    mediaType: file.mediaType,
    sizeBytes: file.sizeBytes,
    ...(note ? { note } : {}),
  };
}

/**
 * The project's files for one turn, from the index only (never object storage): the whole
 * texts when they all fit in `wholeProjectChars`, else the best excerpts for `query` within the
 * budget, each numbered for citing, with a listing of at most `listedFiles` names. Files not
 * indexed yet are listed with the note "being indexed".
 */
export async function retrieveForTurn(
  db: Db,
  project: { id: string; workspace_id: string },
  query: string,
  limits: TurnLimits = TURN_LIMITS,
): Promise<TurnKnowledge> {
  const scope = { workspaceId: project.workspace_id, projectId: project.id };
  const textSize = await indexedTextSize(db, scope.projectId, scope.workspaceId);
  if (textSize <= limits.wholeProjectChars) return wholeFiles(db, scope, limits);
  const [listing, total, excerpts] = await Promise.all([
    listProjectFilesByPath(db, scope, limits.listedFiles),
    countProjectFiles(db, scope),
    query.trim() ? chooseExcerpts(db, scope, query, limits) : [],
  ]);
  return {
    files: listing.map(listed),
    unlisted: Math.max(0, total - listing.length),
    excerpts: excerpts.map(({ source, text }) => ({
      n: source.n,
      path: source.path,
      heading: source.heading,
      pages: source.pages,
      text,
    })),
    sources: excerpts.map(({ source }) => source),
  };
}

/**
 * A small project: every indexed file with text whole, numbered in path order; the listing names
 * the other files too while it has room (files given whole are always shown), a file indexed
 * without text as `no text`, as an unsupported one.
 */
async function wholeFiles(db: Db, scope: ProjectScope, limits: TurnLimits): Promise<TurnKnowledge> {
  const [all, texts] = await Promise.all([
    listProjectFilesByPath(db, scope, EVERY_FILE),
    listIndexedTexts(db, scope.projectId, scope.workspaceId),
  ]);
  const textOf = new Map(texts.map((text) => [text.fileId, text.text]));
  const files: FileInContext[] = [];
  const sources: TurnSource[] = [];
  for (const file of all) {
    const text = textOf.get(file.id);
    if (text === undefined) {
      if (files.length < limits.listedFiles) files.push(listed(file));
      continue;
    }
    // Indexed with no text (a scan without a text layer, an empty file): nothing to give or cite.
    if (text.trim() === '') {
      if (files.length < limits.listedFiles) files.push({ ...listed(file), note: 'no text' });
      continue;
    }
    const n = sources.length + 1;
    sources.push({
      n,
      fileId: file.id,
      path: file.path,
      name: file.name,
      mediaType: file.mediaType,
      heading: null,
      pages: null,
    });
    // A replaced file keeps its previous text until the new one is in: given, without a note.
    files.push({ path: file.path, mediaType: file.mediaType, sizeBytes: file.sizeBytes, n, text });
  }
  return { files, unlisted: Math.max(0, all.length - files.length), excerpts: [], sources };
}

/** The best search results within the budget, at most `excerptsPerFile` per file, numbered by rank. */
async function chooseExcerpts(
  db: Db,
  scope: ProjectScope,
  query: string,
  limits: TurnLimits,
): Promise<Array<{ source: TurnSource; text: string }>> {
  const hits = await searchPassages(db, scope, query, limits.candidates, limits.excerptsPerFile);
  const chosen: Array<{ source: TurnSource; text: string }> = [];
  const perFile = new Map<string, number>();
  let remaining = limits.excerptChars;
  for (const hit of hits) {
    const count = perFile.get(hit.fileId) ?? 0;
    // A chunk that does not fit is skipped, not cut: a smaller one further down may still fit.
    if (count >= limits.excerptsPerFile || hit.text.length > remaining) continue;
    perFile.set(hit.fileId, count + 1);
    remaining -= hit.text.length;
    chosen.push({
      source: {
        n: chosen.length + 1,
        fileId: hit.fileId,
        path: hit.path,
        name: hit.name,
        mediaType: hit.mediaType,
        heading: hit.heading,
        pages: hit.pages,
      },
      text: hit.text,
    });
  }
  return chosen;
}

/** A search result with its file's media type. */
export interface Passage {
  fileId: string;
  path: string;
  name: string;
  mediaType: string;
  text: string;
  heading: string | null;
  pages: number[] | null;
}

/** The project's best passages for a query (lexical, or hybrid when vectors are on), best first. */
export async function searchPassages(
  db: Db,
  scope: ProjectScope,
  query: string,
  limit: number,
  perFile?: number,
): Promise<Passage[]> {
  const hits = await searchProject(db, { ...scope, query, limit, perFile });
  const types = await fileMediaTypes(
    db,
    scope,
    hits.map((hit) => hit.fileId),
  );
  return hits.flatMap((hit) => {
    const mediaType = types.get(hit.fileId);
    return mediaType === undefined
      ? []
      : [
          {
            fileId: hit.fileId,
            path: hit.path,
            name: hit.name,
            mediaType,
            text: hit.text,
            heading: hit.heading,
            pages: hit.pages,
          },
        ];
  });
}
