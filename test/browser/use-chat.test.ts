import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { CHAT_KEYS, chatRows, chatSetup } from '../chat/fixtures.js';
import { type FakeUpstream, failsMidStreamThenGoesOn, startFakeUpstream } from '../helpers/fake-upstream.js';
import { browserRunnable, closeInOrder, launchChromium, serveSite } from '../helpers/browser.js';

const EXAMPLE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../examples/use-chat');
const CLIENT_CHAT_ID = 'browser_chat_1';

let upstream: FakeUpstream;
let t: TestApp;
let apiUrl: string;
let site: Awaited<ReturnType<typeof serveSite>>;
let siteUrl: string;
let bundleDir: string;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  if (!browserRunnable) return;
  bundleDir = mkdtempSync(path.join(tmpdir(), 'atrium-example-'));
  await build({
    entryPoints: [path.join(EXAMPLE, 'app.tsx')],
    outfile: path.join(bundleDir, 'app.js'),
    bundle: true,
    format: 'esm',
    jsx: 'automatic',
    target: 'es2022',
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'silent',
  });
  // The page is served from its own origin, so every API call is cross-origin (CORS).
  site = await serveSite({
    '/app.js': { type: 'text/javascript', body: () => readFileSync(path.join(bundleDir, 'app.js')) },
    '/': { type: 'text/html', body: () => readFileSync(path.join(EXAMPLE, 'index.html')) },
  });
  siteUrl = site.url;

  upstream = await startFakeUpstream();
  t = await createTestApp({ setup: chatSetup(upstream), env: { ATRIUM_CORS_ORIGINS: siteUrl } });
  apiUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  browser = await launchChromium();
  page = await browser.newPage();
}, 60_000);

afterAll(async () => {
  await closeInOrder(browser, t, upstream, site);
  if (bundleDir) rmSync(bundleDir, { recursive: true, force: true });
});

const pageUrl = () =>
  `${siteUrl}/index.html?api=${encodeURIComponent(apiUrl)}&key=${CHAT_KEYS.main}&agent=agt_plain&chat=${CLIENT_CHAT_ID}`;

/**
 * Loads the page and waits for useChat's automatic resume request to be answered: a message
 * sent while it is still open races with it inside useChat (as a human never does).
 */
async function load(action: () => Promise<unknown>) {
  const resumeAnswered = page.waitForResponse((response) => response.url().endsWith('/stream'));
  await action();
  await resumeAnswered;
}

async function ready() {
  try {
    await page
      .getByTestId('status')
      .filter({ hasText: /^ready$/ })
      .waitFor({ timeout: 15_000 });
  } catch (error) {
    throw new Error(`page not ready: ${await page.locator('body').innerText()}`, { cause: error });
  }
}

async function send(text: string) {
  await page.getByTestId('input').fill(text);
  await page.getByTestId('send').click();
}

const assistantTexts = () => page.getByTestId('message-assistant').allInnerTexts();

async function untilLastAssistant(predicate: (text: string) => boolean) {
  await expect
    .poll(async () => predicate((await assistantTexts()).at(-1) ?? ''), { timeout: 15_000 })
    .toBe(true);
}

async function readServerChat() {
  const chat = await t.db.selectFrom('chats').selectAll().where('client_id', '=', CLIENT_CHAT_ID).execute();
  expect(chat).toHaveLength(1);
  return { chat: chat[0]!, rows: await chatRows(t.db, chat[0]!.id) };
}

type ServerChat = Awaited<ReturnType<typeof readServerChat>>;

/**
 * The chat as stored once `settled` holds: the browser shows a reply's end before the server has
 * stored it (storing follows the stream), so the test waits for the row, never for a time.
 */
async function serverChat(settled: (chat: ServerChat) => boolean): Promise<ServerChat> {
  await expect.poll(async () => settled(await readServerChat()), { timeout: 10_000 }).toBe(true);
  return readServerChat();
}

const lastRole = ({ rows }: ServerChat) => rows.at(-1)?.role;
const lastText = ({ rows }: ServerChat) => (rows.length > 0 ? textOf(rows.at(-1)!.parts) : '');

const textOf = (parts: string) =>
  (JSON.parse(parts) as Array<{ type: string; text?: string }>)
    .filter((p) => p.type === 'text')
    .map((p) => p.text)
    .join('');

describe.skipIf(!browserRunnable)(
  'the useChat example in headless Chromium, talking to Atrium over CORS',
  () => {
    it('holds three turns in one chat on the server', async () => {
      await load(() => page.goto(pageUrl()));
      await ready();
      upstream.enqueue(
        { kind: 'text', text: 'Answer one.' },
        { kind: 'text', text: 'Answer two.' },
        { kind: 'text', text: 'Answer three.' },
      );
      for (const [i, text] of ['one', 'two', 'three'].entries()) {
        await send(text);
        await expect.poll(async () => (await assistantTexts()).length, { timeout: 15_000 }).toBe(i + 1);
        await ready();
      }
      expect(await assistantTexts()).toEqual(['Answer one.', 'Answer two.', 'Answer three.']);
      const { rows } = await serverChat((chat) => chat.rows.length === 6 && lastRole(chat) === 'assistant');
      expect(rows.map((r) => r.role)).toEqual([
        'user',
        'assistant',
        'user',
        'assistant',
        'user',
        'assistant',
      ]);
    }, 60_000);

    it('shows the history after a reload, from GET /v1/chats/{id}/messages', async () => {
      await load(() => page.reload());
      await ready();
      expect(await assistantTexts()).toEqual(['Answer one.', 'Answer two.', 'Answer three.']);
      expect(await page.getByTestId('message-user').allInnerTexts()).toEqual(['one', 'two', 'three']);
    }, 30_000);

    it('regenerates the last answer, replacing it on the server', async () => {
      upstream.enqueue({ kind: 'text', text: 'Answer three, again.' });
      await page.getByTestId('regenerate').click();
      await untilLastAssistant((text) => text === 'Answer three, again.');
      await ready();
      const { rows } = await serverChat((chat) => lastText(chat) === 'Answer three, again.');
      expect(rows).toHaveLength(6);
      expect(textOf(rows.at(-1)!.parts)).toBe('Answer three, again.');
    }, 30_000);

    it('stops mid-reply: the stored reply ends where the page stopped, and the upstream call was aborted', async () => {
      const abortedBefore = upstream.aborted();
      upstream.enqueue({ kind: 'held', text: 'w1 w2 w3 w4 w5 w6', afterPieces: 2 });
      await send('four');
      await untilLastAssistant((text) => text.startsWith('w1 w2'));
      await page.getByTestId('stop').click();
      await ready();
      await upstream.waitForAborted(abortedBefore + 1);
      const shown = (await assistantTexts()).at(-1)!;
      const { rows } = await serverChat((chat) => chat.rows.at(-1)?.finish_reason === 'stopped');
      const reply = rows.at(-1)!;
      expect(reply.finish_reason).toBe('stopped');
      expect(shown.startsWith('w1 w2')).toBe(true);
      expect(textOf(reply.parts)).toBe(shown);
      upstream.release();
    }, 30_000);

    it('shows a provider failure before the first token, and the next turn works', async () => {
      upstream.enqueue({ kind: 'fail', status: 500 }, { kind: 'text', text: 'Recovered.' });
      await send('five');
      await page.getByTestId('error').waitFor();
      await send('six');
      await untilLastAssistant((text) => text === 'Recovered.');
      const { rows } = await serverChat((chat) => lastText(chat) === 'Recovered.');
      expect(textOf(rows.at(-1)!.parts)).toBe('Recovered.');
    }, 30_000);

    it('shows a provider failure mid-reply with the text before it, which a reload shows too', async () => {
      const abortedBefore = upstream.aborted();
      upstream.enqueue(failsMidStreamThenGoesOn('data: {"id":"chatcmpl-x","choi\n\n'));
      await send('eight');
      await page.getByTestId('error').waitFor();
      await upstream.waitForAborted(abortedBefore + 1);
      const shown = (await assistantTexts()).at(-1)!;
      expect(shown.trim()).toBe('one two');
      const { rows } = await serverChat((chat) => chat.rows.at(-1)?.finish_reason === 'error');
      expect(textOf(rows.at(-1)!.parts).trim()).toBe(shown.trim());
      await load(() => page.reload());
      await ready();
      expect((await assistantTexts()).at(-1)!.trim()).toBe(shown.trim());
      upstream.release();
    }, 30_000);

    it('resumes a reply after the connection drops (a reload mid-reply)', async () => {
      upstream.enqueue({ kind: 'held', text: 'r1 r2 r3 r4', afterPieces: 2 });
      await send('seven');
      await untilLastAssistant((text) => text.startsWith('r1 r2'));
      await page.reload();
      await untilLastAssistant((text) => text.startsWith('r1 r2'));
      upstream.release();
      await untilLastAssistant((text) => text === 'r1 r2 r3 r4');
      await ready();
      const { rows } = await serverChat((chat) => lastText(chat) === 'r1 r2 r3 r4');
      expect(textOf(rows.at(-1)!.parts)).toBe('r1 r2 r3 r4');
    }, 30_000);
  },
);
