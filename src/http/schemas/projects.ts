import { type TSchema, Type } from 'typebox';
import { MAX_ID_LENGTH, MAX_PROJECT_MEMORY_LENGTH, MAX_PROJECT_NAME_LENGTH } from '../../limits.js';
import { envelope, Timestamp } from './common.js';
import { PATTERNS } from './patterns.js';

export const Project = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    description: Type.String(),
    color: Type.String(),
    icon: Type.String(),
    archived: Type.Boolean(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { $id: 'Project', title: 'Project' },
);

const ProjectRef = Type.Unsafe({ $ref: 'Project#' });

export const CreateProjectBody = Type.Object({
  name: Type.String({
    minLength: 1,
    description: `Required; 1–${MAX_PROJECT_NAME_LENGTH} characters after trimming, at least one of which shows (not only spaces, invisible characters such as U+200B, marks or blank fillers such as U+3164), on one line (a control character such as a tab, or a line separator, is a 400)`,
    examples: ['Research notes'],
  }),
  description: Type.Optional(Type.String({ maxLength: 2000 })),
  instructions: Type.Optional(
    Type.String({ maxLength: 20000, description: 'Given to the model in project chats; not returned' }),
  ),
  color: Type.Optional(Type.String({ pattern: PATTERNS.color.pattern, description: '#RRGGBB' })),
  icon: Type.Optional(Type.String({ maxLength: 64 })),
});

export const ProjectResponse = envelope(Type.Object({ project: ProjectRef }), 'The new project');
export const ProjectListResponse = envelope(
  Type.Object({ projects: Type.Array(ProjectRef) }),
  'The projects',
);

export const ProjectListQuery = Type.Object({
  archived: Type.Optional(
    Type.Boolean({ description: 'true: list the archived projects instead of the active ones' }),
  ),
});

export const ProjectParams = Type.Object({
  projectId: Type.String({ minLength: 1, maxLength: MAX_ID_LENGTH }),
});

/** A field a merge patch may set to `null` (RFC 7396: removed), which puts its default back. */
const resettable = <T extends TSchema>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));

export const PatchProjectBody = Type.Object(
  {
    name: Type.Optional(
      Type.String({
        minLength: 1,
        description: `1–${MAX_PROJECT_NAME_LENGTH} characters after trimming, at least one of which shows, on one line (as on create; a name stored before the one-line rule, sent back as it is, is kept)`,
      }),
    ),
    description: resettable(Type.String({ maxLength: 2000 })),
    instructions: resettable(Type.String({ maxLength: 20000 })),
    memory: resettable(
      Type.String({ maxLength: MAX_PROJECT_MEMORY_LENGTH, description: 'Markdown notes of the project' }),
    ),
    color: resettable(Type.String({ pattern: PATTERNS.color.pattern, description: '#RRGGBB' })),
    icon: resettable(Type.String({ maxLength: 64 })),
    archived: Type.Optional(Type.Boolean()),
  },
  {
    description:
      'Any of the fields; absent ones stay, `null` puts a field back to its default (empty text, `#64748B`, `folder`); `name` and `archived` cannot be null. Unknown fields are ignored.',
  },
);

export const ProjectDetail = Type.Object(
  {
    ...Project.properties,
    instructions: Type.String(),
    memory: Type.String(),
    managedBy: Type.Union([Type.Literal('setup'), Type.Literal('api')]),
  },
  { $id: 'ProjectDetail', title: 'ProjectDetail' },
);

export const ProjectDetailResponse = envelope(
  Type.Object({ project: Type.Unsafe({ $ref: 'ProjectDetail#' }) }),
  'The project with its instructions, memory and managedBy',
);
