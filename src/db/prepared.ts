import type { Compilable, CompiledQuery } from 'kysely';
import type { Db } from './database.js';
import { keepStatementPrepared } from './pg-statements.js';

/** Where a compiled parameter's value comes from: the call's n-th value, or the build itself. */
type Slot = { value: number } | { constant: unknown };

interface Prepared {
  query: CompiledQuery;
  slots: Slot[];
}

/** Shapes kept per statement and database at most; past it the first ones are forgotten. */
const MAX_SHAPES = 64;

const placeholder = (index: number) => `\u0000value ${index}\u0000`;
const PLACEHOLDER = /^\u0000value (\d+)\u0000$/;

/**
 * A select built and compiled by Kysely once per database and shape, then run with each call's
 * values (issue 16). Kysely builds its operation tree and compiles it again on every call; for
 * the statements every request runs (the key lookup, the listings) that cost more CPU on
 * PostgreSQL than the round trip itself. On PostgreSQL the statement is also kept parsed and
 * planned on each connection (src/db/pg-statements.ts).
 *
 * `build` gets the call's arguments with every non-empty string and every number other than 0
 * replaced by a placeholder. It must hand those to Kysely as values (never `sql.lit`, `sql.raw`,
 * a name or arithmetic) and branch only on what is given as it is: null, undefined, booleans,
 * `''`, 0 and how many items an array has, which together are the shape. A placeholder that
 * does not come out as a parameter of its own, or leaks into the SQL text, fails the first call.
 */
export function preparedSelect<Args, Row>(build: (db: Db, args: Args) => Compilable<Row>) {
  const byDatabase = new WeakMap<Db, Map<string, Prepared>>();
  return async (db: Db, args: Args): Promise<Row[]> => {
    const values: unknown[] = [];
    const shape = JSON.stringify(args, (_key, value: unknown) => {
      if ((typeof value === 'string' && value !== '') || (typeof value === 'number' && value !== 0)) {
        values.push(value);
        return placeholder(values.length - 1);
      }
      return value;
    });
    let shapes = byDatabase.get(db);
    if (!shapes) byDatabase.set(db, (shapes = new Map()));
    let prepared = shapes.get(shape);
    if (!prepared) {
      prepared = prepare(build(db, JSON.parse(shape) as Args).compile(), values.length);
      if (shapes.size >= MAX_SHAPES) shapes.delete(shapes.keys().next().value!);
      shapes.set(shape, prepared);
    }
    const parameters = prepared.slots.map((slot) => ('value' in slot ? values[slot.value] : slot.constant));
    const result = await db.executeQuery<Row>({ ...(prepared.query as CompiledQuery<Row>), parameters });
    return result.rows;
  };
}

function prepare(query: CompiledQuery, valueCount: number): Prepared {
  if (query.query.kind !== 'SelectQueryNode')
    throw new Error('preparedSelect: only a select can be prepared');
  if (query.sql.includes('\u0000')) throw new Error('preparedSelect: a value was written into the SQL text');
  const used = new Set<number>();
  const slots = query.parameters.map((parameter): Slot => {
    if (typeof parameter === 'number' && Number.isNaN(parameter)) {
      throw new Error('preparedSelect: a value was used in arithmetic');
    }
    if (typeof parameter !== 'string' || !parameter.includes('\u0000')) return { constant: parameter };
    const match = PLACEHOLDER.exec(parameter);
    if (!match) throw new Error('preparedSelect: a value was changed before it became a parameter');
    used.add(Number(match[1]));
    return { value: Number(match[1]) };
  });
  if (used.size !== valueCount) throw new Error('preparedSelect: a value did not become a parameter');
  keepStatementPrepared(query.sql);
  return { query, slots };
}
