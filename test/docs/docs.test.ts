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
