import { type RawBuilder, type SelectQueryBuilder, sql } from 'kysely';
import type { Dialect } from './database.js';

/**
 * How a listed column becomes a JSON value: as it is (text, integer, null), a cost in USD as
 * every other route shows one (`usd`, see usdJsonText), a 0/1 integer as a JSON boolean (neither
 * engine stores booleans the same way), or text that holds JSON, embedded.
 */
export type JsonField = 'value' | 'usd' | 'boolean' | 'json';

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
    if (kind === 'usd') return sql`cast(${usdJsonText(dialect, column)} as json) as ${sql.ref(name)}`;
    return column;
  });
  return sql<string>`(select '[' || coalesce(string_agg(row_to_json(j)::text, ','), '') || ']' from (select ${sql.join(columns)} from (${rows}) as r) as j)`;
}

/** A listed column as SQLite's json_object takes it, to write the JSON value `kind` says. */
function sqliteValue(column: RawBuilder<unknown>, kind: JsonField): RawBuilder<unknown> {
  if (kind === 'boolean') return sql`json(case when ${column} then 'true' else 'false' end)`;
  if (kind === 'json') return sql`json(${column})`;
  if (kind === 'usd') return sql`json(${usdJsonText('sqlite', column)})`;
  return column;
}

/**
 * A cost (a non-negative double, USD) as the JSON text `JSON.stringify(shownUsd(cost))` writes,
 * byte for byte on both engines: what the API shows a cost as everywhere else
 * (src/models/registry.ts). Neither engine writes a double as JavaScript does (SQLite `2.0e-05`,
 * PostgreSQL `2e-05`, a numeric `0.00002000`), nor rounds as Math.round does (SQLite's round adds
 * 0.5 in floating point, PostgreSQL's rounds half to even), so the query does shownUsd's
 * arithmetic itself: the millionths of a cent `n` are Math.round(cost × 1e8), exactly, as
 * floor(y) plus one when y − floor(y) ≥ 0.5 (that difference is exact in floating point); and
 * n × 1e-8 written in decimals, trailing zeros dropped, is the shortest text of the double
 * n / 1e8 for n below 1e15 (costs below 10 million USD), as JavaScript writes it: fixed from
 * 1e-6 up, `5e-8` and `1.2e-7` below. test/db/json-page.test.ts checks it against shownUsd.
 */
function usdJsonText(dialect: Dialect, cost: RawBuilder<unknown>): RawBuilder<string> {
  const sqlite = dialect === 'sqlite';
  const y = sqlite ? sql`(${cost} * 1e8)` : sql`(${cost} * cast(1e8 as double precision))`;
  // SQLite's cast to integer truncates, which is floor for the non-negative y.
  const n = sqlite
    ? sql`(cast(${y} as integer) + (${y} - cast(${y} as integer) >= 0.5))`
    : sql`cast(floor(${y}) + case when ${y} - floor(${y}) >= 0.5 then 1 else 0 end as bigint)`;
  const text = (value: RawBuilder<unknown>) => (sqlite ? sql`(${value})` : sql`cast(${value} as text)`);
  const fraction = sqlite
    ? sql`substr('0000000' || (${n} % 100000000), -8)`
    : sql`lpad(cast(${n} % 100000000 as text), 8, '0')`;
  return sql<string>`case
    when ${n} < 10 then ${text(n)} || case when ${n} = 0 then '' else 'e-8' end
    when ${n} < 100 then ${text(sql`${n} / 10`)} || rtrim('.' || ${text(sql`${n} % 10`)}, '.0') || 'e-7'
    else ${text(sql`${n} / 100000000`)} || rtrim('.' || ${fraction}, '.0') end`;
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
