import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { CHAT_KEYS, chatSetup } from '../chat/fixtures.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { browserRunnable, closeInOrder, launchChromium, serveSite } from '../helpers/browser.js';

/**
 * The official `openai` SDK in a real browser, on another origin than Atrium: what a browser app
 * built on it (with `dangerouslyAllowBrowser`) meets. The SDK sends its own `x-stainless-*`
 * headers, so each call is preceded by a CORS preflight that Atrium must allow.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The page's script: one completion through the SDK, streamed or not, reported back. */
const PAGE_SCRIPT = `
import OpenAI from 'openai';
window.complete = async ({ baseURL, apiKey, stream, conversationKey }) => {
  const client = new OpenAI({
    baseURL, apiKey, maxRetries: 0, dangerouslyAllowBrowser: true,
    defaultHeaders: conversationKey ? { 'x-atrium-conversation-key': conversationKey } : {},
  });
  const request = { model: 'agt_plain', messages: [{ role: 'user', content: 'Hello' }] };
  try {
    if (stream) {
      const { data, response } = await client.chat.completions.create({ ...request, stream: true }).withResponse();
      let text = '';
      for await (const chunk of data) text += chunk.choices[0]?.delta.content ?? '';
      return { text, chatId: response.headers.get('x-atrium-chat-id') };
    }
    const { data, response } = await client.chat.completions.create(request).withResponse();
    return { text: data.choices[0].message.content, chatId: response.headers.get('x-atrium-chat-id') };
  } catch (error) {
    return { error: error.constructor.name + ': ' + error.message };
  }
};
`;

let upstream: FakeUpstream;
let t: TestApp;
let apiUrl: string;
let site: Awaited<ReturnType<typeof serveSite>>;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  if (!browserRunnable) return;
  const bundle = await build({
    stdin: { contents: PAGE_SCRIPT, resolveDir: ROOT, loader: 'js' },
    bundle: true,
    write: false,
    format: 'esm',
    target: 'es2022',
    logLevel: 'silent',
  });
  const script = bundle.outputFiles[0]!.text;
  site = await serveSite({
    '/app.js': { type: 'text/javascript', body: () => script },
    '/': { type: 'text/html', body: () => '<!doctype html><script type="module" src="/app.js"></script>' },
  });
  upstream = await startFakeUpstream();
  t = await createTestApp({ setup: chatSetup(upstream), env: { ATRIUM_CORS_ORIGINS: site.url } });
  apiUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  browser = await launchChromium();
  page = await browser.newPage();
  await page.goto(site.url);
  await page.waitForFunction(() => 'complete' in window);
}, 60_000);

afterAll(() => closeInOrder(browser, t, upstream, site));

function complete(options: { stream: boolean; conversationKey?: string }) {
  return page.evaluate(
    (args) =>
      (window as unknown as { complete: (a: unknown) => Promise<Record<string, string | null>> }).complete(
        args,
      ),
    { baseURL: `${apiUrl}/v1/openai`, apiKey: CHAT_KEYS.main, ...options },
  );
}

describe.skipIf(!browserRunnable)('the openai SDK in headless Chromium, talking to Atrium over CORS', () => {
  it('gets a completion, and a streamed one', async () => {
    upstream.enqueue({ kind: 'text', text: 'Hi from afar.' });
    expect(await complete({ stream: false })).toEqual({ text: 'Hi from afar.', chatId: null });
    upstream.enqueue({ kind: 'text', text: 'One two three.' });
    expect(await complete({ stream: true })).toEqual({ text: 'One two three.', chatId: null });
  });

  it('stores a conversation named by its key and reads back the chat id header', async () => {
    upstream.enqueue({ kind: 'text', text: 'Stored.' });
    const answer = await complete({ stream: true, conversationKey: 'browser-user-1' });
    expect(answer).toEqual({ text: 'Stored.', chatId: expect.stringMatching(/^cht_/) });
    const chat = await t.db
      .selectFrom('chats')
      .select('id')
      .where('id', '=', answer.chatId!)
      .executeTakeFirst();
    expect(chat).toBeDefined();
  });
});
