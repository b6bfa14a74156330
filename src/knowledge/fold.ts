/**
 * Text as the search indexes compare it: compatibility forms made plain (`ﬁ` → `fi`, full-width
 * `Ｐ` → `P`) and every combining mark removed — accents (`é` → `e`), but also the vowel signs of
 * scripts such as Devanagari; Hangul syllables become their letters (jamo). Lossy, but the same
 * on both engines: chunks are indexed and queries split through this one function, so a word is
 * found whichever way it was typed.
 */
function foldAccents(text: string): string {
  return text.normalize('NFKD').replace(/\p{M}+/gu, '');
}

/**
 * Text as both engines index it, and the words of a query come from: lower-cased (a final sigma
 * as `σ`), accents folded and every run of characters that is not a letter or digit made a space. SQLite's FTS5 table and
 * PostgreSQL's `to_tsvector` are given this, not the chunk's own text, so their tokenizers see
 * the same words {@link queryTerms} does: PostgreSQL's parser would otherwise keep
 * `team@example.com` or `/v1/search` as single tokens, and SQLite's `unicode61` folds only
 * Latin accents, so the index would hold `हिन्दी` or `ﬁrewall` while a query asks for their
 * folded forms.
 */
export function searchableText(text: string): string {
  // Lower-cased here, not by the engines: PostgreSQL lower-cases by the database's locale
  // (nothing beyond ASCII under `C`) and keeps a final sigma (`ΟΔΟΣ` → `οδοσ`, where JavaScript
  // writes `οδος`); SQLite's tokenizer folds both. Migration 022 wrote the chunks of before again.
  return foldAccents(spacedWords(text).toLowerCase())
    .replaceAll('ς', 'σ')
    .replace(/[^\p{L}\p{N}]+/gu, ' ');
}

/** Chinese characters and Japanese kana: written without spaces between words. */
const CJK_LETTERS = String.raw`\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\u30FC`;
/** Thai, Lao, Khmer and Myanmar (Burmese) script: written without spaces between words too. */
const SOUTHEAST_ASIAN_LETTERS = String.raw`\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}`;
const CJK_RUN = new RegExp(`[${CJK_LETTERS}]+`, 'gu');
const SOUTHEAST_ASIAN_RUN = new RegExp(`[${SOUTHEAST_ASIAN_LETTERS}]+`, 'gu');
/** One class, not two: `東京ภาษา` must be split between its scripts as well. */
const UNSPACED_RUN = new RegExp(`[${CJK_LETTERS}${SOUTHEAST_ASIAN_LETTERS}]+`, 'gu');
// ICU picks the dictionary by script, not by this locale: Thai or Khmer is split the same under `zh`.
const dictionaryWords = new Intl.Segmenter('zh', { granularity: 'word' });

/** Whether text holds Chinese or Japanese that {@link searchableText} splits into words. */
export function hasCjkText(text: string): boolean {
  CJK_RUN.lastIndex = 0;
  return CJK_RUN.test(text);
}

/** Whether text holds Thai, Lao, Khmer or Burmese that {@link searchableText} splits into words. */
export function hasSoutheastAsianText(text: string): boolean {
  SOUTHEAST_ASIAN_RUN.lastIndex = 0;
  return SOUTHEAST_ASIAN_RUN.test(text);
}

/**
 * Chinese, Japanese, Thai, Lao, Khmer and Burmese text with a space between its words. Neither
 * engine's tokenizer splits an unspaced run (SQLite's `unicode61` and PostgreSQL's parser keep it
 * as one token up to the next space or punctuation), so a word inside a sentence was never found.
 * ICU's dictionary word break (`Intl.Segmenter`, built into Node) splits `本项目的发布日期是明天`
 * as `本 项目 的 发布 日期 是 明天` and `ภาษาไทยเป็นภาษาที่สวยงาม` as `ภาษา ไทย เป็น ภาษา ที่
 * สวยงาม`, and a query the same way: chunks and queries go through this one function. Before
 * folding: the dictionaries know the written forms (`ガ`, not `カ` and a combining mark; Thai
 * with its vowel signs, which folding removes).
 */
function spacedWords(text: string): string {
  return text.replace(UNSPACED_RUN, (run) =>
    Array.from(dictionaryWords.segment(run), (part) => part.segment).join(' '),
  );
}

/**
 * PostgreSQL's text search configuration for chunks and queries. `simple` (lower-cased words,
 * no stemming, no stop list), as SQLite's tokenizer, so both engines match the same words and
 * the common-word statistics count the very words of a query. Measured on the labelled
 * retrieval set, recall@8 was the same within one question (`simple` 58–59 of 60, `english` 58);
 * stop words and very common words are dropped from queries instead (search.ts).
 */
export const PG_SEARCH_CONFIG = 'simple';
