import { parse, stringify } from 'lossless-json';
import type { ExtractedSection } from '../../types.js';

/**
 * JSON pretty-printed, so minified documents get line breaks to cut at; JSON Lines and text that
 * does not parse are kept as they are (a config file with comments is still worth searching).
 * Parsed with `lossless-json`, which keeps every number as its literal: `JSON.parse` would turn
 * an id of 12345678901234567891 into 12345678901234567000 and a price of 19.90 into 19.9, and
 * the model and search must see the file's own values.
 */
export function jsonSections(text: string): ExtractedSection[] {
  let body = text.trim();
  try {
    body = stringify(parse(body), null, 2) ?? body;
  } catch {
    // Not one JSON document (JSON Lines, JSON with comments, duplicate keys): keep the text.
  }
  return body ? [{ text: body, heading: null, pages: null }] : [];
}
