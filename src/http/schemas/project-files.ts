import { Type } from 'typebox';
import { MAX_FILE_BYTES, megabytes } from '../../limits.js';
import { envelope, MAX_OFFSET, PaginationRef, Timestamp } from './common.js';

const fileFields = {
  id: Type.String(),
  projectId: Type.String(),
  name: Type.String({ description: 'File name (last segment of path)' }),
  path: Type.String({ description: 'Folder and file name, e.g. `docs/specs/a.md`' }),
  mimeType: Type.String(),
  sizeBytes: Type.Integer({ minimum: 0 }),
  type: Type.String({ description: '`uploaded`', examples: ['uploaded'] }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  syncedAt: Timestamp,
  indexStatus: Type.Union(
    ['pending', 'indexing', 'indexed', 'failed', 'unsupported'].map((status) => Type.Literal(status)),
    { description: 'Where indexing of the file for search stands (docs/knowledge.md)' },
  ),
  indexError: Type.Union([Type.String(), Type.Null()], {
    description: 'Why indexing failed, or why the type is unsupported; else null',
  }),
};

export const ProjectFile = Type.Object(fileFields, { $id: 'ProjectFile', title: 'ProjectFile' });
const ProjectFileRef = Type.Unsafe({ $ref: 'ProjectFile#' });

const TreeNodeRef = Type.Unsafe({ $ref: 'ProjectFileTreeNode#' });

/** A node of `tree=true`: a folder with children, or a file with every project file field. */
export const ProjectFileTreeNode = Type.Union(
  [
    Type.Object(
      {
        kind: Type.Literal('folder'),
        name: Type.String(),
        path: Type.String(),
        children: Type.Array(TreeNodeRef),
      },
      { title: 'ProjectFileTreeFolder' },
    ),
    Type.Object({ kind: Type.Literal('file'), ...fileFields }, { title: 'ProjectFileTreeFile' }),
  ],
  { $id: 'ProjectFileTreeNode', title: 'ProjectFileTreeNode' },
);

export const ProjectFileParams = Type.Object({ projectId: Type.String() });
export const ProjectFileIdParams = Type.Object({ projectId: Type.String(), fileId: Type.String() });

export const ListProjectFilesQuery = Type.Object({
  tree: Type.Optional(
    Type.Boolean({ description: 'Return the nested folder tree; limit and offset are then ignored' }),
  ),
  // Bounds are checked by the route, for the flat list only: `tree=true` ignores both (spec).
  limit: Type.Optional(
    Type.Integer({ description: 'Page size, 1–100; omitted: all files. Ignored with tree=true' }),
  ),
  offset: Type.Optional(
    Type.Integer({ default: 0, description: `Items to skip, 0–${MAX_OFFSET}. Ignored with tree=true` }),
  ),
});

export const ProjectFileListResponse = Type.Union(
  [
    envelope(
      Type.Object({ files: Type.Array(ProjectFileRef), pagination: PaginationRef }),
      'A page of files',
    ),
    envelope(Type.Object({ tree: Type.Array(TreeNodeRef) }), 'The folder tree'),
  ],
  { description: 'A page of files, or with `tree=true` the folder tree' },
);

export const UploadUrlBody = Type.Object({
  filename: Type.String({
    minLength: 1,
    maxLength: 255,
    description:
      '1–255 characters; no `/`, `\\`, control characters (C0, DEL, C1), bidirectional controls or marks (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C) or line separators (U+2028, U+2029); not `.` or `..`; at least one visible character (not only spaces, invisible characters such as U+200B, marks or blank fillers such as U+3164). Put in Unicode NFC',
    examples: ['notes.md'],
  }),
  contentType: Type.String({
    minLength: 1,
    maxLength: 255,
    description: 'A MIME type, e.g. `text/markdown`',
    examples: ['text/markdown'],
  }),
  sizeBytes: Type.Integer({
    minimum: 0,
    maximum: MAX_FILE_BYTES,
    description: `Exact size of the upload (≤ ${megabytes(MAX_FILE_BYTES)})`,
    examples: [1024],
  }),
  folder: Type.Optional(
    Type.String({
      maxLength: 2600,
      description:
        'Relative folder, e.g. `docs/specs`; no empty, `.` or `..` segments, no `\\`, control characters, bidirectional controls or marks or line separators, none without a visible character (as `filename`); depth ≤ 10. Put in Unicode NFC',
    }),
  ),
});

export const UploadUrlResponse = envelope(
  Type.Object({
    uploadUrl: Type.String({
      description: 'PUT the bytes here with the declared Content-Type; valid 15 minutes',
    }),
    storagePath: Type.String(),
  }),
  'A signed upload URL and the storage path the file will have',
);

export const SyncResponse = envelope(
  Type.Object({ added: Type.Integer(), removed: Type.Integer(), updated: Type.Integer() }),
  'What the sync added, updated and removed',
);

export const DownloadUrlResponse = envelope(
  Type.Object({
    downloadUrl: Type.String({ description: 'Signed URL, valid 4 hours' }),
    filename: Type.String(),
    contentType: Type.String(),
    sizeBytes: Type.Integer(),
  }),
  'A signed download URL for the file',
);

export const DeleteFileResponse = envelope(
  Type.Object({ deleted: Type.Literal(true) }),
  'The file and its stored object are deleted',
);

export const StoredObjectResponse = envelope(
  Type.Object({ storagePath: Type.String(), sizeBytes: Type.Integer(), etag: Type.String() }),
  'Stored',
);
