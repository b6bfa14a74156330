/** Values per `in (…)` list: well within what either engine accepts as bound parameters. */
const IN_LIST_CHUNK = 500;

/**
 * The rows of a query over a list of values that may be too long for one `in (…)` list: it runs
 * once per chunk of the values, and the rows come back together. No values, no query.
 */
export async function selectInChunks<Value, Row>(
  values: Value[],
  select: (chunk: Value[]) => Promise<Row[]>,
): Promise<Row[]> {
  const rows: Row[] = [];
  for (let start = 0; start < values.length; start += IN_LIST_CHUNK) {
    rows.push(...(await select(values.slice(start, start + IN_LIST_CHUNK))));
  }
  return rows;
}
