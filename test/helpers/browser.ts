import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium } from 'playwright-core';

/** Debian's chromium (`.ci/run` installs it); no browser is downloaded. */
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/** CI always runs the browser tests (and fails without chromium); a machine without it skips them. */
export const browserRunnable = existsSync(CHROMIUM) || Boolean(process.env.CI);

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
      '--disable-sync',
    ],
  });
}

/**
 * A static site on its own origin (so that every API call from its pages is cross-origin):
 * `files` maps a path such as `/app.js` to its content type and body; any other path is `/`.
 */
export async function serveSite(
  files: Record<string, { type: string; body: () => string | Buffer }>,
): Promise<{ url: string; close: () => Promise<void> }> {
  const site: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    const file = files[path] ?? files['/']!;
    res.writeHead(200, { 'content-type': file.type });
    res.end(file.body());
  });
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(site.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => site.close(() => resolve())),
  };
}

/** Closes what a browser test opened, in order, skipping what was never opened (a skipped test). */
export async function closeInOrder(
  ...things: Array<{ close(): Promise<unknown> } | undefined>
): Promise<void> {
  for (const thing of things) await thing?.close();
}
