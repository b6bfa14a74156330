const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Why a string cannot be stored as it was sent, or null. PostgreSQL refuses NUL in text, and an
 * unpaired UTF-16 surrogate has no UTF-8 form (drivers would store U+FFFD instead): such input is
 * refused on every database alike, so SQLite and PostgreSQL answer the same.
 */
export function unstorableTextReason(value: string): string | null {
  if (value.includes('\u0000')) return 'contains a NUL character';
  if (LONE_SURROGATE.test(value)) return 'contains an unpaired UTF-16 surrogate';
  return null;
}

/** A string either database stores as it is (see unstorableTextReason). */
export function isStorableText(value: unknown): value is string {
  return typeof value === 'string' && unstorableTextReason(value) === null;
}
