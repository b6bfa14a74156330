import type { Db } from '../db/database.js';
import { findIndexedText, type ProjectScope } from '../db/repositories/knowledge-turns.js';
import type { ProjectFileReads, ReadResult } from '../models/tools/project-files.js';
import { isStorableText } from '../text.js';
import { searchPassages } from './retrieval.js';

/**
 * What `searchProjectFiles` and `readProjectFile` read: the index of the turn's project (in its
 * workspace), never object storage. A file of another project or tenant is unknown here.
 */
export function projectFileReads(db: Db, scope: ProjectScope): ProjectFileReads {
  return {
    async search(query, limit) {
      const passages = await searchPassages(db, scope, query, limit);
      return passages.map(({ fileId, path, heading, pages, text }) => ({
        fileId,
        path,
        heading,
        pages,
        text,
      }));
    },
    async read(file, offset, length): Promise<ReadResult> {
      const name = file.fileId ?? file.path ?? '';
      // The model's input passed no check of the API: a NUL or a lone surrogate names no file
      // (PostgreSQL would answer a NUL with its own error, shown in the tool's output).
      const found = isStorableText(name)
        ? await findIndexedText(db, scope, file.fileId !== undefined ? { fileId: name } : { path: name })
        : undefined;
      if (!found) throw new Error('No such file in this project');
      if (found.text === null) {
        throw new Error(
          found.indexStatus === 'pending' || found.indexStatus === 'indexing'
            ? `${found.path} is being indexed; its text is not available yet`
            : `${found.path} has no text to read (${found.indexStatus})`,
        );
      }
      const end = windowEnd(found.text, offset, length);
      const text = found.text.slice(offset, end);
      return {
        fileId: found.id,
        path: found.path,
        offset,
        totalLength: found.text.length,
        text,
        nextOffset: end < found.text.length ? end : null,
      };
    },
  };
}

/**
 * Where a window of `length` code units from `offset` ends, never between the two halves of a
 * character beyond the BMP (an emoji, a math letter of a PDF): a lone half is no character for
 * the model, and the next window would start with the other. Such a window ends before the pair,
 * or, when the pair is all it holds, after it.
 */
function windowEnd(text: string, offset: number, length: number): number {
  const end = Math.min(offset + length, text.length);
  const last = text.charCodeAt(end - 1);
  if (end <= offset || end >= text.length || last < 0xd800 || last > 0xdbff) return end;
  return end - 1 > offset ? end - 1 : end + 1;
}
