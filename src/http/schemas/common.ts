import { type TSchema, Type } from 'typebox';
import { MAX_ID_LENGTH } from '../../limits.js';

export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC with milliseconds' });

export const Pagination = Type.Object(
  { total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() },
  { $id: 'Pagination', title: 'Pagination' },
);
export const PaginationRef = Type.Unsafe<{ total: number; limit: number; offset: number }>({
  $ref: 'Pagination#',
});

/** A list's `offset`; the maximum keeps it within what either database takes as a row count. */
export const MAX_OFFSET = 2_147_483_647;
export const OffsetQuery = Type.Optional(
  Type.Integer({ minimum: 0, maximum: MAX_OFFSET, default: 0, description: 'Items to skip' }),
);

/**
 * `{ data: … }`: the envelope of every successful response except `POST /chat`. The description
 * is the response's in the OpenAPI document.
 */
export function envelope<T extends TSchema>(data: T, description: string) {
  return Type.Object({ data }, { description });
}

export { COMMON_ERRORS, ErrorBody, errorResponses, PROTOCOL_ERRORS } from './error-body.js';

/** The body types of a PATCH (a JSON merge patch, RFC 7396), as its OpenAPI operation lists them. */
export const PATCH_BODY_TYPES = ['application/json', 'application/merge-patch+json'];

export const API_KEY_SECURITY: Array<Record<string, string[]>> = [{ apiKey: [] }, { bearer: [] }];

/** `x-workspace-id`: how an organization key picks the workspace a route acts in. */
export const WorkspaceHeader = Type.Object({
  'x-workspace-id': Type.Optional(
    Type.String({
      maxLength: MAX_ID_LENGTH,
      description: 'Required with an organization key: the workspace to act in',
      examples: ['wsp_demo'],
    }),
  ),
});
