import { Type } from 'typebox';
import { envelope, OffsetQuery, PaginationRef, Timestamp } from './common.js';

export const Agent = Type.Object(
  {
    id: Type.String(),
    title: Type.String(),
    description: Type.String(),
    image: Type.String(),
    model: Type.String(),
    visibility: Type.Union([
      Type.Literal('workspace'),
      Type.Literal('organization'),
      Type.Literal('private'),
    ]),
    category: Type.String(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { $id: 'Agent', title: 'Agent' },
);

export const AgentListQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({ minimum: 1, description: 'Page size, default 20; values above 100 are clamped to 100' }),
  ),
  offset: OffsetQuery,
});

export const WorkspaceParams = Type.Object({
  workspaceId: Type.String({ minLength: 1, maxLength: 200, examples: ['wsp_demo'] }),
});

export const AgentListResponse = envelope(
  Type.Object({
    agents: Type.Array(Type.Unsafe({ $ref: 'Agent#' })),
    pagination: PaginationRef,
  }),
  'A page of agents',
);
