import { Type } from 'typebox';
import { envelope, Timestamp } from './common.js';

const Role = Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('member')]);

export const MeResponse = envelope(
  Type.Object({
    key: Type.Object({
      id: Type.String(),
      name: Type.String(),
      kind: Type.Union([Type.Literal('workspace'), Type.Literal('organization'), Type.Literal('session')]),
      expiresAt: Type.Union([Timestamp, Type.Null()]),
    }),
    user: Type.Object({ id: Type.String(), name: Type.String(), email: Type.String() }),
    organization: Type.Object({ id: Type.String(), name: Type.String() }),
    workspace: Type.Union([
      Type.Object({
        id: Type.String(),
        name: Type.String(),
        role: Type.Union([Role, Type.Null()], { description: 'Null when the key’s user is not a member' }),
      }),
      Type.Null(),
    ]),
  }),
  'The calling key, its user, organization and workspace',
);
