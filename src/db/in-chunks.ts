/** Values per `in (…)` list or rows per insert: well within what either engine accepts as bound parameters. */
const IN_LIST_CHUNK = 500;

/**
 * Runs `action` once per chunk of a list that may be too long for one statement (an `in (…)`
 * list, or a multi-row insert: SQLite takes at most 32,766 bound values, PostgreSQL 65,535).
 * No values, no call.
 */
export async function forEachChunk<Value>(
  values: Value[],
  action: (chunk: Value[]) => Promise<unknown>,
): Promise<void> {
  for (let start = 0; start < values.length; start += IN_LIST_CHUNK) {
    await action(values.slice(start, start + IN_LIST_CHUNK));
  }
}

/**
 * The rows of a query over a list of values that may be too long for one `in (…)` list: it runs
 * once per chunk of the values, and the rows come back together. No values, no query.
 */
export async function selectInChunks<Value, Row>(
  values: Value[],
  select: (chunk: Value[]) => Promise<Row[]>,
): Promise<Row[]> {
  const rows: Row[] = [];
  await forEachChunk(values, async (chunk) => rows.push(...(await select(chunk))));
  return rows;
}
