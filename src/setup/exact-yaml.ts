import { Document, isMap, isPair, isScalar, isSeq, parseDocument, Scalar } from 'yaml';

/**
 * The yaml library's output options for a file people edit and `apply` reads back. No folding
 * (`lineWidth: 0`): a multi-line text stays a literal block, line for line as stored, rather than
 * a folded `>` block whose line breaks mean something else. A double-quoted text stays on one
 * line: yaml 2.9.1 breaks long ones at their newlines and then escapes a space after a blank line
 * twice (`"\n \n…"` read back with a backslash).
 */
const OPTIONS = { lineWidth: 0, doubleQuotedMinMultiLineLength: Number.MAX_SAFE_INTEGER } as const;

/**
 * `value` as YAML that parses back to exactly `value`. The library picks each text's style
 * (plain, quoted, literal block with its chomping indicator); a text it would still write so that
 * it reads back otherwise (yaml 2.9.1 writes `" \n"` as a `|+` block without the indentation
 * indicator, read back as `"\n"`) is written double-quoted, with escapes, instead. Throws rather
 * than answer YAML that reads back otherwise.
 */
export function exactYaml(value: unknown): string {
  const document = new Document(value, { aliasDuplicateObjects: false });
  for (let attempt = 0; ; attempt++) {
    const text = document.toString(OPTIONS);
    const misread = misreadScalars(document.contents, parseDocument(text).contents);
    if (misread.length === 0) return text;
    if (attempt > 0) throw new Error('The YAML written does not read back as the value it was written from');
    for (const scalar of misread) scalar.type = Scalar.QUOTE_DOUBLE;
  }
}

const SHAPE_CHANGED = 'The YAML written does not read back in the shape it was written from';

/** The scalars of `written` whose counterpart in `read` (the same place in the parsed text) differs. */
function misreadScalars(written: unknown, read: unknown): Scalar[] {
  if (isScalar(written)) return isScalar(read) && read.value === written.value ? [] : [written];
  if (isMap(written) || isSeq(written)) {
    const items = (read as { items?: unknown[] } | null)?.items;
    if ((!isMap(read) && !isSeq(read)) || items?.length !== written.items.length) {
      throw new Error(SHAPE_CHANGED);
    }
    return written.items.flatMap((item, i) => {
      const other = items[i];
      if (isPair(item)) {
        if (!isPair(other)) throw new Error(SHAPE_CHANGED);
        return [...misreadScalars(item.key, other.key), ...misreadScalars(item.value, other.value)];
      }
      return misreadScalars(item, other);
    });
  }
  if (written === read) return [];
  throw new Error(SHAPE_CHANGED);
}
