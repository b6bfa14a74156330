import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseSetupText } from '../../src/setup/validate.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DOCS = [
  'README.md',
  'CHANGELOG.md',
  'BENCHMARKS.md',
  ...readdirSync(path.join(ROOT, 'docs')).map((f) => `docs/${f}`),
];

const withoutCodeBlocks = (text: string) => text.replaceAll(/^ *```[\s\S]*?^ *```$/gm, '');

/** The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as `-`, repeats numbered. */
function headingAnchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of withoutCodeBlocks(readFileSync(file, 'utf8')).matchAll(
    /^#{1,6}\s+(.+?)\s*#*$/gm,
  )) {
    const slug = heading!
      .toLowerCase()
      .replaceAll(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
      .replaceAll(' ', '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

describe('the project docs', () => {
  it.each(DOCS)('%s links only to files of the repository', (doc) => {
    const text = readFileSync(path.join(ROOT, doc), 'utf8');
    // Markdown links to relative paths (anchors and web addresses are not files).
    const targets = [...text.matchAll(/\]\(([^)\s#]+)(?:#[^)]*)?\)/g)]
      .map((m) => m[1]!)
      .filter((target) => !/^[a-z]+:/.test(target));
    const missing = targets.filter(
      (target) => !existsSync(path.resolve(path.dirname(path.join(ROOT, doc)), target)),
    );
    expect(missing).toEqual([]);
    // The specs the project was built from are not part of it: the docs must not send readers
    // there (the changelog's history may name them).
    if (doc !== 'CHANGELOG.md') expect(text.match(/`spec\/[\w-]+\.md`/g) ?? []).toEqual([]);
  });

  it.each(DOCS)('%s links only to headings that exist', (doc) => {
    const text = withoutCodeBlocks(readFileSync(path.join(ROOT, doc), 'utf8'));
    const broken = [...text.matchAll(/\]\(([^)\s#]*)#([^)\s]+)\)/g)]
      .filter(([, target]) => !/^[a-z]+:/.test(target!))
      .filter(([, target, anchor]) => {
        const file = target ? path.resolve(path.dirname(path.join(ROOT, doc)), target) : path.join(ROOT, doc);
        return existsSync(file) && !headingAnchors(file).has(anchor!);
      })
      .map(([link]) => link);
    expect(broken).toEqual([]);
  });

  it('gives a setup-file example that `atrium apply` accepts', () => {
    const text = readFileSync(path.join(ROOT, 'docs/setup-file.md'), 'utf8');
    const example = /^```yaml\n([\s\S]*?)^```$/m.exec(text)![1]!;
    const parsed = parseSetupText(example, 'docs/setup-file.md');
    expect(parsed.ok ? [] : parsed.problems).toEqual([]);
  });

  // A reader copies a whole setup file from any page: one that starts at the top level
  // (`providers:`, `models:`, `organizations:`) must apply as it stands, not only as a fragment.
  it.each(DOCS)('%s gives whole setup files that `atrium apply` accepts', (doc) => {
    const text = readFileSync(path.join(ROOT, doc), 'utf8');
    const files = [...text.matchAll(/^```yaml\n((?:providers|models|organizations):[\s\S]*?)^```$/gm)];
    for (const [, example] of files) {
      const parsed = parseSetupText(example!, doc);
      expect(parsed.ok ? [] : parsed.problems, example).toEqual([]);
    }
  });
});
