import { Type } from 'typebox';
import { envelope, OffsetQuery, PaginationRef, Timestamp } from './common.js';

const Visibility = Type.Union([
  Type.Literal('private'),
  Type.Literal('workspace'),
  Type.Literal('organization'),
]);

export const Skill = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    description: Type.String(),
    visibility: Visibility,
    ownerUserId: Type.String({ description: 'The user whose key uploaded the skill' }),
    storagePath: Type.String({
      description:
        'Where the skill’s files are stored: `skills/{workspaceId}/{skillId}/`, whatever version it is at (a replace writes its version in a folder of its own inside it, `.atrium-version-{generation}/`, a name reserved in skills’ paths)',
    }),
    metadata: Type.Object(
      {},
      {
        additionalProperties: true,
        description:
          'The rest of the SKILL.md front matter (license, allowed-tools, metadata, …); at most 32,768 characters as JSON',
      },
    ),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { title: 'Skill' },
);

/** A skill read alone: its list item's fields, plus the files stored for it. */
export const SkillDetail = Type.Object(
  {
    ...Skill.properties,
    files: Type.Array(Type.Object({ path: Type.String(), sizeBytes: Type.Integer() }), {
      description:
        'The stored files of the current version, by path: each its path in the skill (as uploaded; a replaced skill’s files are in its version folder under `storagePath`)',
    }),
  },
  { title: 'SkillDetail' },
);

export const SkillDetailResponse = envelope(Type.Object({ skill: SkillDetail }), 'The skill with its files');

export const SkillListQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({ minimum: 1, description: 'Page size, default 20; values above 100 are clamped to 100' }),
  ),
  offset: OffsetQuery,
});

export const SkillListResponse = envelope(
  Type.Object({
    skills: Type.Array(Skill),
    pagination: PaginationRef,
  }),
  'A page of skills',
);

/** Documents the multipart form; the route reads it as a stream, not through this schema. */
export const BulkUploadForm = Type.Object({
  files: Type.Array(Type.String({ format: 'binary' }), {
    description: 'Zip archives of skill directories (each with a SKILL.md) or standalone .md files',
  }),
  visibility: Type.Optional(
    Type.Union([Type.Literal('private'), Type.Literal('workspace'), Type.Literal('organization')], {
      default: 'private',
      description: '`workspace` and `organization` need a workspace admin or owner',
    }),
  ),
  mode: Type.Optional(
    Type.Union([Type.Literal('create'), Type.Literal('replace')], {
      default: 'create',
      description:
        '`create`: same-name skills are skipped. `replace`: a same-name skill (its uploader’s, or any for an owner or admin) is replaced, keeping its id and `storagePath` (its new files in a version folder of their own inside it), and listed in `updated`',
    }),
  ),
});

export const SkillErrorItem = Type.Object({
  file: Type.String({ description: 'The uploaded file the skill came from' }),
  name: Type.Union([Type.String(), Type.Null()], {
    description: 'The skill (its front-matter or directory name); null when the whole file failed',
  }),
  code: Type.String({
    examples: ['unsafe_path', 'missing_skill_md', 'invalid_front_matter', 'invalid_archive'],
  }),
  message: Type.String(),
});

export const BulkUploadResult = envelope(
  Type.Object({
    created: Type.Array(Type.Object({ id: Type.String(), name: Type.String(), storagePath: Type.String() })),
    updated: Type.Optional(
      Type.Array(Type.Object({ id: Type.String(), name: Type.String(), storagePath: Type.String() }), {
        description: 'With `mode=replace` only: same-name skills replaced (ids and `storagePath` kept)',
      }),
    ),
    skipped: Type.Array(Type.Object({ name: Type.String(), reason: Type.String(), file: Type.String() })),
    errors: Type.Array(SkillErrorItem),
    summary: Type.Object({
      total: Type.Integer({ description: 'created + skipped + failed (+ updated with mode=replace)' }),
      created: Type.Integer(),
      skipped: Type.Integer(),
      updated: Type.Optional(Type.Integer({ description: 'With `mode=replace` only' })),
      failed: Type.Integer({ description: 'Number of `errors` items' }),
    }),
  }),
  'Every skill was created, updated or skipped',
);
