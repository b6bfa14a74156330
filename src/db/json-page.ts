import { type RawBuilder, type SelectQueryBuilder, sql } from 'kysely';
import type { Dialect } from './database.js';

/**
 * How a listed column becomes a JSON value: as it is (text, integer, null), a floating-point
 * number as JavaScript writes it (`number`), a 0/1 integer as a JSON boolean (neither engine
 * stores booleans the same way), or text that holds JSON, embedded.
 */
export type JsonField = 'value' | 'number' | 'boolean' | 'json';

/**
 * The rows of `rows` as one JSON array text, built by the database in the rows' order: a listing
 * then skips turning every row into a JavaScript object and serializing it again (issue 16).
 * `rows` selects exactly the listed fields, each already named as in the response; `fields`
 * gives each name's kind, in the order the response shows them. Both engines aggregate an
 * ordered subquery in its order (SQLite's json_group_array, PostgreSQL's string_agg, as
 * Kysely's own jsonArrayFrom helpers rely on); the listing tests check the order.
 */
export function jsonArray(
  dialect: Dialect,
  // The rows' tables and columns do not matter here, only the names they are selected as.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  rows: SelectQueryBuilder<any, any, any>,
  fields: Record<string, JsonField>,
): RawBuilder<string> {
  const entries = Object.entries(fields);
  if (dialect === 'sqlite') {
    const pairs = entries.map(
      ([name, kind]) => sql`${sql.lit(name)}, ${sqliteValue(sql.ref(`r.${name}`), kind)}`,
    );
    return sql<string>`(select coalesce(json_group_array(json_object(${sql.join(pairs)})), '[]') from (${rows}) as r)`;
  }
  // row_to_json writes compact JSON (json_agg and json_build_object add spaces and newlines).
  const columns = entries.map(([name, kind]) => {
    const column = sql.ref(`r.${name}`);
    if (kind === 'boolean') return sql`(${column} <> 0) as ${sql.ref(name)}`;
    if (kind === 'json') return sql`cast(${column} as json) as ${sql.ref(name)}`;
    return column;
  });
  return sql<string>`(select '[' || coalesce(string_agg(row_to_json(j)::text, ','), '') || ']' from (select ${sql.join(columns)} from (${rows}) as r) as j)`;
}

/** A listed column as SQLite's json_object takes it, to write the JSON value `kind` says. */
function sqliteValue(column: RawBuilder<unknown>, kind: JsonField): RawBuilder<unknown> {
  if (kind === 'boolean') return sql`json(case when ${column} then 'true' else 'false' end)`;
  if (kind === 'json') return sql`json(${column})`;
  // SQLite writes a whole REAL as `0.0` where JSON.stringify (every other route, and PostgreSQL
  // here) writes `0`: a whole one goes as an integer (one past an integer's range stays a REAL).
  if (kind === 'number')
    return sql`case when ${column} = cast(${column} as integer) then cast(${column} as integer) else ${column} end`;
  return column;
}

/**
 * A response body `{ "data": … }` from its `data` as JSON text, as the UTF-8 bytes sent. Listings
 * keep these bytes in their caches (src/db/listing-cache.ts): a string body is measured
 * (Content-Length) and encoded again on every send, 8 µs for a 17 KB page, where bytes are
 * written as they are (issue 16).
 */
export function jsonDataBody(data: string): Buffer {
  return Buffer.from(`{"data":${data}}`);
}

/** The JSON text of one response `data` object from its parts, each already JSON text. */
export function jsonObjectText(parts: Record<string, string>): string {
  return `{${Object.entries(parts)
    .map(([name, json]) => `${JSON.stringify(name)}:${json}`)
    .join(',')}}`;
}
