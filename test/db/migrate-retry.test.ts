import { describe, expect, it } from 'vitest';
import { catalogChangedMeanwhile } from '../../src/db/database.js';

/** An error as `pg` throws it, with its SQLSTATE. */
function pgError(code: string, message: string) {
  return Object.assign(new Error(message), { code });
}

describe('migrations when another schema changes meanwhile (PostgreSQL)', () => {
  it('runs again when the listing of every schema meets a schema, table or column that went away', () => {
    expect(catalogChangedMeanwhile(pgError('3F000', 'schema "t_other" does not exist'), 't_ours')).toBe(true);
    expect(catalogChangedMeanwhile(pgError('3F000', 'schema "t_other" does not exist'), undefined)).toBe(
      true,
    );
    expect(
      catalogChangedMeanwhile(pgError('42P01', 'relation "t_other.agent_runs" does not exist'), 't_ours'),
    ).toBe(true);
    // What a CI run met: another test file's migration changed its own agent_runs meanwhile.
    expect(
      catalogChangedMeanwhile(
        pgError('42703', 'column "user_id" of relation "agent_runs" does not exist'),
        't_ours',
      ),
    ).toBe(true);
  });

  it('fails at once when its own schema or table is missing, or for any other error', () => {
    expect(catalogChangedMeanwhile(pgError('3F000', 'schema "t_ours" does not exist'), 't_ours')).toBe(false);
    expect(
      catalogChangedMeanwhile(pgError('42P01', 'relation "t_ours.agent_runs" does not exist'), 't_ours'),
    ).toBe(false);
    // Unqualified, as Atrium's own migrations name tables.
    expect(catalogChangedMeanwhile(pgError('42P01', 'relation "x" does not exist'), 't_ours')).toBe(false);
    expect(catalogChangedMeanwhile(pgError('42601', 'syntax error at or near "x"'), 't_ours')).toBe(false);
    expect(catalogChangedMeanwhile(new Error('schema "t_other" does not exist'), 't_ours')).toBe(false);
    expect(catalogChangedMeanwhile('3F000', 't_ours')).toBe(false);
  });
});
