import { type QueryExecutor, SqliteAdapter, sql } from 'kysely';

/**
 * The key a name is listed by when a listing is ordered "case-insensitively" (agents by title,
 * skills by name): its composed form (NFC), lower-cased by Unicode's default rules. It is
 * computed here when the row is written and stored beside the name, and both engines compare
 * it byte by byte (code point order; PostgreSQL's key columns are declared `collate "C"`):
 * SQLite's `lower()` folds ASCII only and PostgreSQL's follows the database's locale, so an
 * order by `lower(name)` put `Éb` before `éa` on one and after it on the other.
 *
 * Changing this function changes the order of rows written before: a migration must then
 * write every stored key again (024-case-folded-sort-keys wrote the first ones).
 */
export function caseInsensitiveSortKey(name: string): string {
  return name.normalize('NFC').toLowerCase();
}

/**
 * `a` and `b` compared code point by code point, as the databases compare sort keys (negative
 * when `a` comes first). JavaScript's `<` compares UTF-16 units, which puts a character beyond
 * U+FFFF (its first unit is a surrogate, 0xD800–0xDBFF) before U+E000–U+FFFF (full-width
 * letters, for one); so surrogates are moved above the units after them before comparing.
 */
export function compareCodePoints(a: string, b: string): number {
  const shared = Math.min(a.length, b.length);
  for (let i = 0; i < shared; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return inCodePointRank(x) - inCodePointRank(y);
  }
  return a.length - b.length;
}

/** A UTF-16 unit's place in code point order: U+E000–U+FFFF down by 0x800, surrogates above them. */
function inCodePointRank(unit: number): number {
  if (unit < 0xd800) return unit;
  return unit >= 0xe000 ? unit - 0x800 : unit + 0x2000;
}

/** A database, a transaction, or a migration's database: what knows its engine. */
type Engine = { getExecutor(): QueryExecutor };

/**
 * A text column compared in code point order on both engines, to order a listing by or to
 * compare its cursor with: SQLite's default, and PostgreSQL's `C` collation (a database's own
 * may be a language's, which orders `agt_aaaa` before `agt_BBBB` and `api.md` before
 * `README.md`). A listing's order and its cursor must use the same one, or pages skip or repeat
 * rows; its index must hold the column in the same collation to serve the order.
 */
export function inCodePointOrder(db: Engine, column: string) {
  // The adapter, not database.ts's dialectOf: migrations import this module.
  return db.getExecutor().adapter instanceof SqliteAdapter
    ? sql<string>`${sql.ref(column)}`
    : sql<string>`${sql.ref(column)} collate "C"`;
}

/** The id a listing breaks ties of equal keys by, in code point order on both engines. */
export function idInCodePointOrder(db: Engine) {
  return inCodePointOrder(db, 'id');
}
