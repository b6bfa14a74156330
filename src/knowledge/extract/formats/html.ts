import { convert, type FormatCallback } from 'html-to-text';
import type { ExtractedSection } from '../../types.js';
import { sectionsAtHeadings } from './markdown.js';

/** Marks heading lines in the converted text; a control character no HTML text contains. */
const HEADING_MARK = '\u001e';
const MARKED_HEADING = new RegExp(`^${HEADING_MARK}(#{1,6}) (.*)$`);

/** h1–h6 become "## Title" lines preceded by the mark, so the sectioner can find them. */
const heading: FormatCallback = (elem, walk, builder, formatOptions) => {
  const level = Number(elem.name?.slice(1)) || 1;
  builder.openBlock({ leadingLineBreaks: formatOptions.leadingLineBreaks ?? 2 });
  builder.addLiteral(`${HEADING_MARK}${'#'.repeat(level)} `);
  walk(elem.children, builder);
  builder.closeBlock({ trailingLineBreaks: formatOptions.trailingLineBreaks ?? 1 });
};

const headingSelectors = [1, 2, 3, 4, 5, 6].map((n) => ({ selector: `h${n}`, format: 'markedHeading' }));

/**
 * HTML as text (html-to-text: tables and lists laid out, link targets, images, scripts and
 * styles dropped), cut at its headings like Markdown, with the heading path kept.
 */
export function htmlSections(html: string): ExtractedSection[] {
  const text = convert(html, {
    wordwrap: false,
    formatters: { markedHeading: heading },
    selectors: [
      ...headingSelectors,
      { selector: 'a', options: { ignoreHref: true } },
      // Tables laid out as rows and columns (the default runs cells together).
      {
        selector: 'table',
        format: 'dataTable',
        options: { uppercaseHeaderCells: false, maxColumnWidth: 120, colSpacing: 3, rowSpacing: 0 },
      },
      { selector: 'img', format: 'skip' },
      { selector: 'script', format: 'skip' },
      { selector: 'style', format: 'skip' },
      { selector: 'noscript', format: 'skip' },
      { selector: 'svg', format: 'skip' },
    ],
  });
  return sectionsAtHeadings(text, (line) => {
    const match = MARKED_HEADING.exec(line);
    return match ? { level: match[1].length, title: match[2], consumesNext: false } : null;
  }).map((section) => ({ ...section, text: section.text.replaceAll(HEADING_MARK, '') }));
}
