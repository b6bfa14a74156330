/**
 * Text as the search indexes compare it: accents removed (`é` → `e`, `ﬁ` → `fi`), as SQLite's
 * `unicode61 remove_diacritics 2` does, so both engines match "cafe" and "café" alike.
 */
export function foldAccents(text: string): string {
  return text.normalize('NFKD').replace(/\p{M}+/gu, '');
}

/**
 * Text for PostgreSQL's `to_tsvector`: accents folded and every run of characters that is not a
 * letter or digit made a space. PostgreSQL's parser would otherwise keep `team@example.com` or
 * `/v1/search` as single tokens that no query word matches; split like this it sees the words
 * SQLite's tokenizer and {@link queryTerms} see.
 */
export function searchableText(text: string): string {
  return foldAccents(text).replace(/[^\p{L}\p{N}]+/gu, ' ');
}

/**
 * PostgreSQL's text search configuration for chunks and queries. `simple` (lower-cased words,
 * no stemming, no stop list), as SQLite's tokenizer, so both engines match the same words and
 * the common-word statistics count the very words of a query. Measured on the labelled
 * retrieval set, recall@8 was the same within one question (`simple` 58–59 of 60, `english` 58);
 * stop words and very common words are dropped from queries instead (search.ts).
 */
export const PG_SEARCH_CONFIG = 'simple';
