import type { ExtractedSection } from '../../types.js';

/**
 * JSON pretty-printed, so minified documents get line breaks to cut at; JSON Lines and text that
 * does not parse are kept as they are (a config file with comments is still worth searching).
 */
export function jsonSections(text: string): ExtractedSection[] {
  let body = text.trim();
  try {
    body = JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    // Not one JSON document (JSON Lines, JSON with comments): keep the text.
  }
  return body ? [{ text: body, heading: null, pages: null }] : [];
}
