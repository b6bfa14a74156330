import type { Readable } from 'node:stream';
import type { Db } from '../db/database.js';
import type { ProjectTable } from '../db/schema.js';
import type { FileInContext } from '../models/context.js';
import { isTextLike } from './chat-messages.js';
import { projectStoragePrefix } from './project-files.js';

/** Characters of project file text a conversation may carry, all files together. */
export const FILE_CONTEXT_BUDGET_CHARS = 60_000;
/** Files larger than this are listed by name only: reading them would cost more than it gives. */
const MAX_READ_BYTES = 10 * 1024 * 1024;

/** Reads a stored object by key, or null when it is gone. */
export type ObjectReader = (key: string) => Promise<Readable | null>;

const SOURCE_EXTENSIONS =
  /\.(md|markdown|txt|csv|tsv|json|jsonl|ya?ml|toml|xml|html?|css|js|mjs|cjs|ts|tsx|jsx|py|rb|go|rs|java|kt|c|h|cpp|hpp|cs|php|sh|sql|swift|scala|r|lua|ini|cfg|conf|env|log)$/i;

export function isTextLikeFile(path: string, mediaType: string): boolean {
  return isTextLike(mediaType) || SOURCE_EXTENSIONS.test(path);
}

async function readAll(stream: Readable, limit: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
    size += buffer.length;
    if (size > limit) {
      stream.destroy();
      return null;
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

async function pdfText(bytes: Buffer): Promise<string> {
  const { extractText, getDocumentProxy } = await import('unpdf');
  const pdf = await getDocumentProxy(new Uint8Array(bytes));
  const { text } = await extractText(pdf, { mergePages: true });
  return text;
}

/** The storage key of a project file (the layout the project files service writes). */
export function projectFileKey(workspaceId: string, projectId: string, path: string): string {
  return `${projectStoragePrefix(workspaceId, projectId)}${path}`;
}

/**
 * The project's files as the model sees them: text-like files and PDFs (text extracted) while
 * the character budget lasts, in path order; every other file, or one past the budget, by name.
 */
export async function projectFilesContext(
  db: Db,
  project: Pick<ProjectTable, 'id' | 'workspace_id'>,
  readObject: ObjectReader | undefined,
  budget = FILE_CONTEXT_BUDGET_CHARS,
): Promise<FileInContext[]> {
  const files = await db
    .selectFrom('project_files')
    .select(['path', 'mime_type', 'size_bytes'])
    .where('project_id', '=', project.id)
    .where('workspace_id', '=', project.workspace_id)
    .orderBy('path')
    .execute();
  let remaining = budget;
  const result: FileInContext[] = [];
  for (const file of files) {
    const entry: FileInContext = {
      path: file.path,
      mediaType: file.mime_type,
      sizeBytes: Number(file.size_bytes),
    };
    result.push(entry);
    const isPdf = file.mime_type === 'application/pdf' || file.path.toLowerCase().endsWith('.pdf');
    if (!isPdf && !isTextLikeFile(file.path, file.mime_type)) {
      entry.note = 'not a text file';
      continue;
    }
    if (!readObject) {
      entry.note = 'storage unavailable';
      continue;
    }
    if (remaining <= 0) {
      entry.note = 'over the context budget';
      continue;
    }
    if (entry.sizeBytes > MAX_READ_BYTES) {
      entry.note = 'too large to read';
      continue;
    }
    try {
      const stream = await readObject(projectFileKey(project.workspace_id, project.id, file.path));
      const bytes = stream ? await readAll(stream, MAX_READ_BYTES) : null;
      if (!bytes) {
        entry.note = 'could not be read';
        continue;
      }
      const text = isPdf ? await pdfText(bytes) : bytes.toString('utf8');
      if (text.length > remaining) {
        entry.text = text.slice(0, remaining);
        entry.note = `truncated to ${remaining} of ${text.length} characters`;
        remaining = 0;
      } else {
        entry.text = text;
        remaining -= text.length;
      }
    } catch {
      entry.note = 'could not be read';
    }
  }
  return result;
}
