import { Readable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ECHO_LABEL } from '../../src/models/echo.js';
import { FILE_CONTEXT_BUDGET_CHARS, projectFileKey } from '../../src/services/chat-context.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatSetup, userText } from './fixtures.js';
import { makePdf } from './pdf.js';

let upstream: FakeUpstream;
let t: TestApp;

async function addFile(path: string, mimeType: string, content: Buffer | string) {
  const bytes = Buffer.isBuffer(content) ? content : Buffer.from(content);
  await t.store.put(projectFileKey('wsp_main', 'prj_docs', path), Readable.from([bytes]), {
    contentType: mimeType,
  });
  const now = new Date().toISOString();
  await t.db
    .insertInto('project_files')
    .values({
      id: `fil_${path.replace(/\W/g, '_')}`,
      workspace_id: 'wsp_main',
      project_id: 'prj_docs',
      name: path.split('/').at(-1)!,
      path,
      mime_type: mimeType,
      size_bytes: bytes.length,
      etag: 'test',
      type: 'uploaded',
      created_at: now,
      updated_at: now,
      synced_at: now,
    })
    .execute();
}

const bigText = 'b'.repeat(FILE_CONTEXT_BUDGET_CHARS + 5_000);

beforeAll(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({ setup: chatSetup(upstream) });
  await addFile('docs/notes.md', 'text/markdown', '# Notes\nShip on Monday.');
  await addFile('data.json', 'application/json', '{"budget": 10000}');
  await addFile('report.pdf', 'application/pdf', makePdf('Quarterly revenue grew'));
  await addFile('logo.png', 'image/png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3]));
  await addFile('src/main.ts', 'application/octet-stream', 'export const answer = 42;');
  await addFile('z-big.txt', 'text/plain', bigText);
  await addFile('zz-after.txt', 'text/plain', 'never read');
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
  it('gives the model text-like files and PDF text within the budget, other files by name, in path order', async () => {
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
      '<file path="data.json" type="application/json" size="17">\n{"budget": 10000}\n</file>',
    );
    expect(files).toContain(
      '<file path="docs/notes.md" type="text/markdown" size="23">\n# Notes\nShip on Monday.\n</file>',
    );
    expect(files).toMatch(
      /<file path="report.pdf" type="application\/pdf" size="\d+">\nQuarterly revenue grew\n<\/file>/,
    );
    expect(files).toContain('<file path="logo.png" type="image/png" size="8" note="not a text file" />');
    expect(files).toContain(
      '<file path="src/main.ts" type="application/octet-stream" size="25">\nexport const answer = 42;\n</file>',
    );
    expect(files).toMatch(
      /<file path="z-big.txt" type="text\/plain" size="65000" note="truncated to \d+ of 65000 characters">\nb+\n<\/file>/,
    );
    expect(files).toContain(
      '<file path="zz-after.txt" type="text/plain" size="10" note="over the context budget" />',
    );
    const order = [...files.matchAll(/<file path="([^"]+)"/g)].map((m) => m[1]);
    expect(order).toEqual([
      'data.json',
      'docs/notes.md',
      'logo.png',
      'report.pdf',
      'src/main.ts',
      'z-big.txt',
      'zz-after.txt',
    ]);
    // Everything file text adds together stays within the budget.
    const texts = [...files.matchAll(/">\n([\s\S]*?)\n<\/file>/g)].map((m) => m[1]!.length);
    expect(texts.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(FILE_CONTEXT_BUDGET_CHARS);
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
        'Project files: data.json, docs/notes.md, logo.png, report.pdf, src/main.ts, z-big.txt, zz-after.txt',
      ].join('\n'),
    );
  });
});
