import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { preparedSelect } from '../../src/db/prepared.js';
import { createTestEnv, engineName, type TestEnv } from '../helpers/app.js';

let env: TestEnv;
beforeAll(async () => {
  env = await createTestEnv();
  const db = env.database.db;
  await db
    .insertInto('organizations')
    .values(
      ['org_a', 'org_b', 'org_c'].map((id) => ({
        id,
        name: id.toUpperCase(),
        created_at: '2026-01-01T00:00:00.000Z',
        updated_at: '2026-01-01T00:00:00.000Z',
      })),
    )
    .execute();
});
afterAll(() => env?.close());

describe(`preparedSelect (${engineName})`, () => {
  it('builds once per shape and runs each call with its own values', async () => {
    let builds = 0;
    const organizations = preparedSelect((db, query: { ids: string[]; limit: number; named?: string }) => {
      builds++;
      let select = db.selectFrom('organizations').select('name').where('id', 'in', query.ids);
      if (query.named !== undefined) select = select.where('name', '=', query.named);
      return select.orderBy('id').limit(query.limit);
    });
    const db = env.database.db;
    expect(await organizations(db, { ids: ['org_a', 'org_b'], limit: 5 })).toEqual([
      { name: 'ORG_A' },
      { name: 'ORG_B' },
    ]);
    expect(await organizations(db, { ids: ['org_b', 'org_c'], limit: 1 })).toEqual([{ name: 'ORG_B' }]);
    expect(builds).toBe(1);
    // Another number of ids, or a value given where it was not: other shapes, built once each.
    expect(await organizations(db, { ids: ['org_c'], limit: 5 })).toEqual([{ name: 'ORG_C' }]);
    expect(await organizations(db, { ids: ['org_a', 'org_c'], limit: 5, named: 'ORG_C' })).toEqual([
      { name: 'ORG_C' },
    ]);
    expect(await organizations(db, { ids: ['org_a', 'org_b'], limit: 5, named: 'ORG_A' })).toEqual([
      { name: 'ORG_A' },
    ]);
    expect(builds).toBe(3);
  });

  it('refuses a build that does not pass every value to the database as a value', async () => {
    const db = env.database.db;
    const arithmetic = preparedSelect((db, query: { limit: number }) =>
      db
        .selectFrom('organizations')
        .select('id')
        .limit(query.limit + 1),
    );
    await expect(arithmetic(db, { limit: 2 })).rejects.toThrow(
      'a value was changed before it became a parameter',
    );
    const literal = preparedSelect((db, query: { id: string }) =>
      db.selectFrom('organizations').select('id').where('id', '=', sql.lit(query.id)),
    );
    await expect(literal(db, { id: 'org_a' })).rejects.toThrow('a value was written into the SQL text');
    const unused = preparedSelect((db, _query: { id: string }) =>
      db.selectFrom('organizations').select('id'),
    );
    await expect(unused(db, { id: 'org_a' })).rejects.toThrow('a value did not become a parameter');
  });

  it.skipIf(engineName !== 'postgres')(
    'keeps the statement parsed and planned on the PostgreSQL connection, by name',
    async () => {
      const db = env.database.db;
      const byId = preparedSelect((db, query: { id: string }) =>
        db.selectFrom('organizations').select('name as probe_name').where('id', '=', query.id),
      );
      // One connection at a time: the pool hands the last released one out again.
      expect(await byId(db, { id: 'org_b' })).toEqual([{ probe_name: 'ORG_B' }]);
      const { rows } = await sql<{ name: string }>`
        select name from pg_prepared_statements where statement like '%probe_name%'`.execute(db);
      expect(rows).toHaveLength(1);
      expect(rows[0]!.name).toMatch(/^atrium_[0-9a-f]{32}$/);
      expect(await byId(db, { id: 'org_c' })).toEqual([{ probe_name: 'ORG_C' }]);
    },
  );
});
