/** Which tables a statement writes (src/db/change-signals.ts), as the exact caches are told. */
import {
  DummyDriver,
  Kysely,
  type RootOperationNode,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  sql,
} from 'kysely';
import { describe, expect, it } from 'vitest';
import { writtenTables } from '../../src/db/change-signals.js';

const db = new Kysely<{ projects: { id: string; name: string } }>({
  dialect: {
    createAdapter: () => new SqliteAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (kysely) => new SqliteIntrospector(kysely),
    createQueryCompiler: () => new SqliteQueryCompiler(),
  },
});
const tables = (node: RootOperationNode) => {
  const written = writtenTables(node);
  return written === 'unknown' ? written : [...written];
};
const raw = (query: ReturnType<typeof sql>) => tables(query.compile(db).query);

describe('tables a statement writes', () => {
  it('names the target of a query built with Kysely', () => {
    expect(tables(db.updateTable('projects').set({ name: 'x' }).compile().query)).toEqual(['projects']);
    expect(tables(db.deleteFrom('projects').compile().query)).toEqual(['projects']);
  });

  it('names the target of a plain raw insert, update or delete, and nothing for a raw select', () => {
    expect(raw(sql`insert into knowledge_vectors (a) values (${1})`)).toEqual(['knowledge_vectors']);
    expect(raw(sql`delete from "knowledge_vectors" where a = ${1}`)).toEqual(['knowledge_vectors']);
    expect(raw(sql`UPDATE chats set title = ${'t'}`)).toEqual(['chats']);
    expect(raw(sql`select 1`)).toEqual([]);
  });

  it('is unknown for raw statements it cannot read: several, a CTE, a schema change, an identifier', () => {
    expect(raw(sql`delete from a; delete from b`)).toBe('unknown');
    expect(raw(sql`with x as (delete from a returning 1) select 1`)).toBe('unknown');
    expect(raw(sql`alter table projects add column y text`)).toBe('unknown');
    expect(raw(sql`insert into ${sql.table('projects')} values (1)`)).toBe('unknown');
  });
});
