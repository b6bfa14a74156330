import type { DestinationStream } from 'pino';
import type { FileDownloader } from '../../src/services/file-downloads.js';
import { createTestApp } from '../helpers/app.js';
import { startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatSetup } from './fixtures.js';

/**
 * The chat fixtures' app with a fake upstream of its own, listening on a free port, as tests of
 * replies over a real connection need it (limits, shutdown, several replies at once): `post`
 * sends `POST /v1/chat` with the main key.
 */
export async function listeningChatApp(options: {
  env?: Record<string, string>;
  shutdownWaitMs?: number;
  logStream?: DestinationStream;
  mcpConnectTimeoutMs?: number;
  fileDownloader?: FileDownloader;
}) {
  const upstream = await startFakeUpstream();
  const t = await createTestApp({ setup: chatSetup(upstream), ...options });
  const baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  const headers = { 'content-type': 'application/json', 'x-service-api-key': CHAT_KEYS.main };
  return {
    upstream,
    t,
    baseUrl,
    headers,
    post: (body: Record<string, unknown>) =>
      fetch(`${baseUrl}/v1/chat`, { method: 'POST', headers, body: JSON.stringify(body) }),
    async close() {
      upstream.release();
      await t.close();
      await upstream.close();
    },
  };
}
