/**
 * Text as the search indexes compare it: accents removed (`é` → `e`, `ﬁ` → `fi`), as SQLite's
 * `unicode61 remove_diacritics 2` does, so both engines match "cafe" and "café" alike.
 */
export function foldAccents(text: string): string {
  return text.normalize('NFKD').replace(/\p{M}+/gu, '');
}
