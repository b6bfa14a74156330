import { createHash } from 'node:crypto';
import pg from 'pg';

/** The SQL texts kept as named statements, with their names. */
const names = new Map<string, string>();
/** Far more than preparedSelect's statements and shapes; past it texts simply run unnamed. */
const MAX_NAMED = 1000;

/**
 * Asks PostgreSQL to keep `sqlText` parsed and planned on each connection that runs it (a named
 * statement) instead of parsing, analysing and planning it anew every time, as it does for the
 * unnamed statements a query with parameters otherwise uses. For the statements every request
 * runs (preparedSelect's), that planning was most of the database's CPU per request (issue 16).
 * After five runs PostgreSQL may switch a statement to a generic plan when it costs no more.
 */
export function keepStatementPrepared(sqlText: string): void {
  if (names.size >= MAX_NAMED || names.has(sqlText)) return;
  names.set(sqlText, `atrium_${createHash('sha256').update(sqlText).digest('hex').slice(0, 32)}`);
}

/**
 * The pool's client: Kysely calls `query(text, values)`; a text kept by keepStatementPrepared
 * runs as a named statement (pg parses it once per connection), everything else as before.
 */
export class PreparingClient extends pg.Client {
  // pg's overloads cannot be restated one by one; the arguments are passed on untouched.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override query(...args: any[]): any {
    const [text, values] = args as [unknown, unknown];
    const name =
      typeof text === 'string' && args.length === 2 && Array.isArray(values) ? names.get(text) : undefined;
    if (name) return super.query({ name, text: text as string, values: values as unknown[] });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    return (super.query as (...rest: any[]) => any)(...args);
  }
}
