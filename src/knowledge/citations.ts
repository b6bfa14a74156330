import type { TurnSource } from './retrieval.js';

/**
 * A passage given to the model, as a UI message part and stream chunk (AI SDK
 * `source-document`): `sourceId` `<fileId>#<n>`, `title` the file's path. `useChat` keeps it as
 * a part of the assistant message.
 */
export interface SourceDocumentPart {
  type: 'source-document';
  sourceId: string;
  mediaType: string;
  title: string;
  filename: string;
}

export function sourceDocumentParts(sources: TurnSource[]): SourceDocumentPart[] {
  return sources.map((source) => ({
    type: 'source-document',
    sourceId: `${source.fileId}#${source.n}`,
    mediaType: source.mediaType,
    title: source.path,
    filename: source.name,
  }));
}

/** `sources` of a JSON reply (spec/knowledge.md). */
export interface SourceView {
  n: number;
  fileId: string;
  path: string;
  pages: number[] | null;
  heading: string | null;
}

export function sourceViews(sources: TurnSource[]): SourceView[] {
  return sources.map(({ n, fileId, path, pages, heading }) => ({ n, fileId, path, pages, heading }));
}
