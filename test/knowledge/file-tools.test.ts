import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectFileReads } from '../../src/knowledge/file-tools.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { addIndexedFile } from './turn-fixtures.js';

/** `readProjectFile`'s windows over a file's extracted text (docs/knowledge.md, "Each turn"). */

let env: TestEnv;
const DOCS = { workspaceId: 'wsp_main', projectId: 'prj_docs' };
// Astral characters (two UTF-16 code units each) at the window edges below.
const TEXT = 'ab🍲cd𝔸e';

beforeAll(async () => {
  env = await createTestEnv();
  await applyFixture(env, TENANCY_SETUP);
  await addIndexedFile(env.database.db, { ...DOCS, path: 'menu.md', text: TEXT });
});
afterAll(() => env.close());

describe(`readProjectFile windows (${engineName})`, () => {
  it('never cuts a character in two: a window ends before a pair it would split, and the next starts with it', async () => {
    const reads = projectFileReads(env.database.db, DOCS);
    const texts: string[] = [];
    let offset: number | null = 0;
    while (offset !== null) {
      const window = await reads.read({ path: 'menu.md' }, offset, 3);
      expect(window.text).toMatch(/^(?:[^\ud800-\udfff]|[\ud800-\udbff][\udc00-\udfff])+$/u);
      texts.push(window.text);
      offset = window.nextOffset;
    }
    expect(texts).toEqual(['ab', '🍲c', 'd𝔸', 'e']);
    // A window of one code unit at a pair still gives the whole character.
    expect((await reads.read({ path: 'menu.md' }, 2, 1)).text).toBe('🍲');
  });
});
