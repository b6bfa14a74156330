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

/**
 * What shows nothing on its own, as a regular-expression class (`u` flag): white space;
 * default-ignorable code points (zero-width space U+200B, word joiner U+2060, BOM U+FEFF, the
 * Mongolian vowel separator U+180E, variation selectors, tag characters, the combining grapheme
 * joiner U+034F, soft hyphen, and the code points Unicode keeps for more of them); the other
 * format characters, control characters and marks, which have nothing to sit on alone; and the
 * blank fillers that are letters yet render as nothing (Hangul U+115F, U+1160, U+3164, U+FFA0,
 * the empty braille cell U+2800). Within a name that shows something these are fine: U+200D
 * joins emoji, U+200C shapes Persian, a mark sits on its letter. Kept as source text too: the
 * `oneLineName` schema pattern (http/schemas/patterns.ts) is built from it.
 */
export const SHOWS_NOTHING_CLASS =
  '\\p{White_Space}\\p{Default_Ignorable_Code_Point}\\p{Cf}\\p{Cc}\\p{M}\\u115F\\u1160\\u3164\\uFFA0\\u2800';

const SHOWS_SOMETHING = new RegExp(`[^${SHOWS_NOTHING_CLASS}]`, 'u');

/**
 * Whether `text` holds a character that shows. A name or title without one is an empty line in
 * every list that shows it: file, folder and skill names, project names, chat titles, agent
 * titles and key names are all held to this one rule.
 */
export function showsCharacter(text: string): boolean {
  return SHOWS_SOMETHING.test(text);
}

/** What a name or title that shows no character is told, wherever it is refused. */
export const NO_VISIBLE_CHARACTER = 'must contain a visible character';
