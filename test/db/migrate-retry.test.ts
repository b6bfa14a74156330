import { describe, expect, it } from 'vitest';
import { otherSchemaDropped } from '../../src/db/database.js';

/** What `pg` throws for a schema that does not exist (SQLSTATE 3F000). */
function invalidSchema(name: string) {
  return Object.assign(new Error(`schema "${name}" does not exist`), { code: '3F000' });
}

describe('migrations when another schema is dropped meanwhile (PostgreSQL)', () => {
  it('runs again when the schema that went away is someone else’s', () => {
    expect(otherSchemaDropped(invalidSchema('t_other'), 't_ours')).toBe(true);
    expect(otherSchemaDropped(invalidSchema('t_other'), undefined)).toBe(true);
  });

  it('fails when its own schema is missing, or for any other error', () => {
    expect(otherSchemaDropped(invalidSchema('t_ours'), 't_ours')).toBe(false);
    expect(
      otherSchemaDropped(
        Object.assign(new Error('relation "x" does not exist'), { code: '42P01' }),
        't_ours',
      ),
    ).toBe(false);
    expect(otherSchemaDropped(new Error('schema "t_other" does not exist'), 't_ours')).toBe(false);
    expect(otherSchemaDropped('3F000', 't_ours')).toBe(false);
  });
});
