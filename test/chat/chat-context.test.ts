import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ECHO_LABEL } from '../../src/models/echo.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { addIndexedFile, addUnindexedFile } from '../knowledge/turn-fixtures.js';
import { CHAT_KEYS, chatSetup, userText } from './fixtures.js';

let upstream: FakeUpstream;
let t: TestApp;

const DOCS = { workspaceId: 'wsp_main', projectId: 'prj_docs' };

// What the indexer stored for each file (test/knowledge covers indexing itself): a small
// project, so every indexed file is given whole.
beforeAll(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({ setup: chatSetup(upstream) });
  await addIndexedFile(t.db, { ...DOCS, path: 'docs/notes.md', text: '# Notes\nShip on Monday.' });
  await addIndexedFile(t.db, {
    ...DOCS,
    path: 'data.json',
    mimeType: 'application/json',
    text: '{"budget": 10000}',
  });
  await addIndexedFile(t.db, {
    ...DOCS,
    path: 'report.pdf',
    mimeType: 'application/pdf',
    text: 'Quarterly revenue grew',
    chunks: [{ text: 'Quarterly revenue grew', pages: [1] }],
  });
  await addUnindexedFile(t.db, { ...DOCS, path: 'logo.png', mimeType: 'image/png', status: 'unsupported' });
  await addIndexedFile(t.db, {
    ...DOCS,
    path: 'src/main.ts',
    mimeType: 'application/octet-stream',
    text: 'export const answer = 42;',
  });
  await addUnindexedFile(t.db, { ...DOCS, path: 'zz-after.txt', mimeType: 'text/plain', status: 'pending' });
});
afterAll(async () => {
  await t.close();
  await upstream.close();
});
beforeEach(() => {
  upstream.requests.length = 0;
});

function chat(payload: Record<string, unknown>) {
  return t.app.inject({
    method: 'POST',
    url: '/v1/chat',
    headers: { 'x-service-api-key': CHAT_KEYS.main },
    payload,
  });
}

describe('project files in the context', () => {
  it('gives the model the indexed text of a small project whole, other files by name, in path order', async () => {
    const res = await chat({
      agentId: 'agt_plain',
      projectId: 'prj_docs',
      messages: [userText('summarize')],
    });
    expect(res.statusCode).toBe(200);
    const system = upstream.lastRequest().body.messages?.[0];
    expect(system?.role).toBe('system');
    const content = system!.content as string;
    const files = content.slice(content.indexOf('<project_files>'));
    expect(files).toContain(
      '<file path="data.json" n="1" type="application/json" size="17">\n{"budget": 10000}\n</file>',
    );
    expect(files).toContain(
      '<file path="docs/notes.md" n="2" type="text/markdown" size="23">\n# Notes\nShip on Monday.\n</file>',
    );
    expect(files).toContain('<file path="logo.png" type="image/png" size="10" note="no text" />');
    expect(files).toContain(
      '<file path="report.pdf" n="3" type="application/pdf" size="22">\nQuarterly revenue grew\n</file>',
    );
    expect(files).toContain(
      '<file path="src/main.ts" n="4" type="application/octet-stream" size="25">\nexport const answer = 42;\n</file>',
    );
    expect(files).toContain('<file path="zz-after.txt" type="text/plain" size="10" note="being indexed" />');
    const order = [...files.matchAll(/<file path="([^"]+)"/g)].map((m) => m[1]);
    expect(order).toEqual([
      'data.json',
      'docs/notes.md',
      'logo.png',
      'report.pdf',
      'src/main.ts',
      'zz-after.txt',
    ]);
    expect(res.json().sources.map((source: { path: string }) => source.path)).toEqual([
      'data.json',
      'docs/notes.md',
      'report.pdf',
      'src/main.ts',
    ]);
  });

  it('puts agent instructions first, then project instructions, memory and files', async () => {
    await chat({
      agentId: 'agt_echo',
      projectId: 'prj_docs',
      model: 'fake-small',
      messages: [userText('x')],
    });
    const content = upstream.lastRequest().body.messages?.[0]?.content as string;
    const at = (s: string) => content.indexOf(s);
    expect(at('Be an echo.')).toBe(0);
    expect(at('<project_instructions>')).toBeGreaterThan(0);
    expect(at('<project_memory>')).toBeGreaterThan(at('<project_instructions>'));
    expect(at('<project_files>')).toBeGreaterThan(at('<project_memory>'));
  });

  it('has the echo model show the context it received', async () => {
    const res = await chat({
      agentId: 'agt_echo',
      projectId: 'prj_docs',
      messages: [userText('What do you see?')],
    });
    expect(res.statusCode).toBe(200);
    expect(upstream.requests).toHaveLength(0);
    expect(res.json().text).toBe(
      [
        `${ECHO_LABEL} You said: "What do you see?"`,
        'Agent instructions: "Be an echo."',
        'Project instructions: "Cite file names."',
        'Project memory: "The launch is on Monday."',
        'Project files: data.json, docs/notes.md, logo.png, report.pdf, src/main.ts, zz-after.txt',
      ].join('\n'),
    );
  });
});
