import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatSetup, CHAT_KEYS, userText } from '../chat/fixtures.js';
import { startRawMcpServer } from '../chat/raw-mcp-server.js';
import { EventReader, textDeltas } from '../chat/sse-reader.js';
import { engineName } from '../helpers/app.js';
import { deferred } from '../helpers/deferred.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type ServeCluster, startServeCluster } from '../helpers/serve-processes.js';

/** Redis runs on the development and CI machines; each run uses keys of its own. */
const REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';

let upstream: FakeUpstream;
let cluster: ServeCluster;
/**
 * The MCP server of `agt_tools`: its `initialize` is answered once `setUp` resolves, so a turn of
 * that agent is held in its set-up (chat active, no stream yet) as long as a test needs.
 */
let mcp: Awaited<ReturnType<typeof startRawMcpServer>>;
let setUp = { ...deferred(), reached: deferred() };
beforeAll(async () => {
  upstream = await startFakeUpstream();
  mcp = await startRawMcpServer({
    tools: [{ name: 'lookup', inputSchema: { type: 'object' } }],
    gate: async () => {
      setUp.reached.resolve();
      await setUp.promise;
    },
  });
  setUp.resolve();
  cluster = await startServeCluster({
    // The third is killed mid-reply by one test; started with the others, in parallel.
    processes: 3,
    setup: chatSetup(upstream, { mcpUrl: mcp.url }),
    env: { REDIS_URL, ATRIUM_REDIS_PREFIX: `atrium-test-${randomBytes(4).toString('hex')}` },
  });
}, 120_000);
afterAll(async () => {
  upstream?.release();
  setUp.resolve();
  await cluster?.close();
  await upstream?.close();
  await mcp?.close();
});

const key = { 'x-service-api-key': CHAT_KEYS.main };
const WORDS = 'alpha beta gamma delta epsilon zeta';

/** A `/v1/chat` request with the test's key, to the process at `url`. */
function postChat(url: string, body: Record<string, unknown>) {
  return fetch(`${url}/v1/chat`, {
    method: 'POST',
    headers: { ...key, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

async function startReply(url: string, id: string, afterPieces: number) {
  upstream.enqueue({ kind: 'held', text: WORDS, afterPieces });
  const response = await postChat(url, {
    agentId: 'agt_plain',
    stream: true,
    id,
    messages: [userText('go')],
  });
  expect(response.status).toBe(200);
  const events = new EventReader(response);
  await events.until(textDeltas(afterPieces));
  return { chatId: response.headers.get('x-chat-id')!, events };
}

/** A streamed turn of `agt_tools` (its MCP server answering at once) on the chat `id`. */
async function startTurn(url: string, id: string, text: string) {
  const response = await postChat(url, {
    agentId: 'agt_tools',
    stream: true,
    id,
    messages: [userText(text)],
  });
  expect(response.status).toBe(200);
  return response;
}

describe(`stop and resume across two atrium serve processes with REDIS_URL (${engineName})`, () => {
  it('a stop sent to one process aborts the reply another process generates', async () => {
    const [a, b] = cluster.servers;
    const abortedBefore = upstream.aborted();
    const { chatId, events } = await startReply(a!.url, 'cluster-stop', 2);
    const seen = await fetch(`${b!.url}/v1/chats/${chatId}`, { headers: key });
    expect(((await seen.json()) as { data: { chat: { active: boolean } } }).data.chat.active).toBe(true);
    // The list on the other process asks Redis for every listed chat in one MGET.
    const listed = await fetch(`${b!.url}/v1/chats?limit=100`, { headers: key });
    const chats = ((await listed.json()) as { data: { chats: Array<{ id: string; active: boolean }> } }).data
      .chats;
    expect(chats.find((chat) => chat.id === chatId)?.active).toBe(true);
    expect(chats.filter((chat) => chat.id !== chatId).every((chat) => !chat.active)).toBe(true);

    const stop = await fetch(`${b!.url}/v1/chat/${chatId}/stop`, { method: 'POST', headers: key });
    const stopped = ((await stop.json()) as { data: { stopped: boolean; messageId: string } }).data;
    expect(stopped.stopped).toBe(true);

    // Read at once, before the reply's own stream is: the stop answered once A had stored the
    // reply (it used to answer as soon as it had published the stop, and the read raced A's store).
    const messages = await fetch(`${b!.url}/v1/chats/${chatId}/messages`, { headers: key });
    const body = (await messages.json()) as {
      data: {
        messages: Array<{
          id: string;
          role: string;
          parts: Array<{ type: string; text?: string }>;
          metadata: { finishReason?: string };
        }>;
      };
    };
    const reply = body.data.messages.at(-1)!;
    expect(reply).toMatchObject({ id: stopped.messageId, role: 'assistant' });
    expect(reply.metadata.finishReason).toBe('stopped');
    expect(reply.parts.find((p) => p.type === 'text')?.text).toBe('alpha beta ');
    // …and the chat no longer runs a reply anywhere: a regenerate (refused with 409 while one
    // runs) sent to B at once is answered.
    const regenerated = await postChat(b!.url, {
      agentId: 'agt_plain',
      chatId,
      trigger: 'regenerate-message',
      messageId: stopped.messageId,
      messages: [body.data.messages.at(-2)],
    });
    expect(regenerated.status).toBe(200);

    await events.all();
    expect(events.chunks.at(-1)).toMatchObject({
      type: 'finish',
      messageMetadata: { finishReason: 'stopped' },
    });
    expect(events.text()).toBe('alpha beta ');
    await upstream.waitForAborted(abortedBefore + 1);
    upstream.release();
  });

  it('a reply generated by one process is resumed through the other, from its start', async () => {
    const [a, b] = cluster.servers;
    const { chatId, events } = await startReply(a!.url, 'cluster-resume', 1);
    await events.cancel();
    // resumable-stream gives the owning process 1 s to answer over Redis, else 204: on a loaded
    // machine that can pass, and the reply is still held, so asking again is what a client does.
    let resumed = await fetch(`${b!.url}/v1/chat/cluster-resume/stream`, { headers: key });
    for (let attempt = 1; resumed.status === 204 && attempt < 5; attempt++) {
      resumed = await fetch(`${b!.url}/v1/chat/cluster-resume/stream`, { headers: key });
    }
    expect(resumed.status).toBe(200);
    const replay = new EventReader(resumed);
    await replay.until(textDeltas(1));
    expect(replay.chunks[0]).toMatchObject({ type: 'start', messageMetadata: { chatId } });
    upstream.release();
    await replay.all();
    expect(replay.text()).toBe(WORDS);
    expect(replay.done).toBe(true);
    const after = await fetch(`${b!.url}/v1/chat/${chatId}/stream`, { headers: key });
    expect(after.status).toBe(204);
  });

  it('two regenerates of one chat sent to two processes at once leave one answer, never two side by side', async () => {
    const [a, b] = cluster.servers;
    // Several rounds: the two used to race past the running-reply check, each on its own process,
    // and each replaced the answer both had read.
    for (let round = 0; round < 4; round++) {
      const first = await postChat(a!.url, { agentId: 'agt_plain', messages: [userText('one')] });
      const { chatId } = (await first.json()) as { chatId: string };
      const listed = await fetch(`${a!.url}/v1/chats/${chatId}/messages`, { headers: key });
      const stored = ((await listed.json()) as { data: { messages: unknown[] } }).data.messages;
      const regenerate = (url: string) =>
        postChat(url, {
          agentId: 'agt_plain',
          chatId,
          trigger: 'regenerate-message',
          messages: stored,
        });
      const answers = await Promise.all([regenerate(a!.url), regenerate(b!.url)]);
      const bodies = (await Promise.all(answers.map((answer) => answer.json()))) as Array<{ code?: string }>;
      // Overlapping, the second is refused (a reply runs); one that came once the first had
      // ended regenerates the first's answer.
      answers.forEach((answer, i) => {
        if (answer.status !== 200) {
          expect(answer.status, JSON.stringify(bodies)).toBe(409);
          expect(bodies[i]).toMatchObject({ code: 'conflict', details: { chatId } });
        }
      });
      expect(answers.some((answer) => answer.status === 200)).toBe(true);
      // One answer to the user's turn, not two side by side.
      const after = await fetch(`${b!.url}/v1/chats/${chatId}/messages`, { headers: key });
      const messages = ((await after.json()) as { data: { messages: Array<{ role: string }> } }).data
        .messages;
      expect(messages.map((message) => message.role)).toEqual(['user', 'assistant']);
    }
  });
});

/**
 * A turn of `agt_tools` on the chat, sent to `url`, held in its set-up (its MCP server not yet
 * answering) once this resolves: the chat is active, and no stream exists yet.
 */
async function holdSetUp(url: string, chatId: string, text: string) {
  setUp = { ...deferred(), reached: deferred() };
  const response = postChat(url, {
    agentId: 'agt_tools',
    stream: true,
    id: chatId,
    messages: [userText(text)],
  });
  // Awaited by the test; a test that fails first must not leave it rejecting unhandled.
  response.catch(() => undefined);
  await setUp.reached.promise;
  return { response };
}

/** What a promise has become after `ms`: its value, or 'waiting'. */
function after<T>(promise: Promise<T>, ms: number): Promise<T | 'waiting'> {
  return Promise.race([
    promise,
    new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), ms)),
  ]);
}

describe(`resuming through one process a reply another process is setting up (${engineName})`, () => {
  it('waits for the reply to start and replays it from its start to [DONE]', async () => {
    const [a, b] = cluster.servers;
    // The chat exists (a resume of a chat not stored yet is 204): its first turn, to its end.
    await new EventReader(await startTurn(a!.url, 'setup-cluster', 'first')).all();

    upstream.enqueue({ kind: 'held', text: WORDS, afterPieces: 1 });
    const { response: running } = await holdSetUp(a!.url, 'setup-cluster', 'second');
    const chat = await fetch(`${b!.url}/v1/chats/setup-cluster`, { headers: key });
    expect(((await chat.json()) as { data: { chat: { active: boolean } } }).data.chat.active).toBe(true);

    // What useChat({ resume: true }) asks on a page load at this moment, reaching process B.
    const resumed = fetch(`${b!.url}/v1/chat/setup-cluster/stream`, { headers: key });
    // Not answered while A sets the reply up (it was: 204 at once, and the page never showed it)…
    expect(await after(resumed, 1_000)).toBe('waiting');
    // …but once the reply starts, from its start.
    setUp.resolve();
    let answer = await resumed;
    // resumable-stream gives the generating process 1 s to answer over Redis, else 204: on a
    // loaded machine that can pass, and the reply is held, so asking again is what a client does.
    for (let attempt = 1; answer.status === 204 && attempt < 5; attempt++) {
      answer = await fetch(`${b!.url}/v1/chat/setup-cluster/stream`, { headers: key });
    }
    expect(answer.status).toBe(200);
    const replay = new EventReader(answer);
    await replay.until(textDeltas(1));
    expect(replay.chunks[0]).toMatchObject({
      type: 'start',
      messageMetadata: { chatId: expect.any(String) },
    });
    upstream.release();
    await replay.all();
    expect(replay.text()).toBe(WORDS);
    expect(replay.done).toBe(true);
    await new EventReader(await running).all();
  }, 60_000);

  it('answers 204 once a turn being set up there is refused (its chat deleted meanwhile)', async () => {
    const [a, b] = cluster.servers;
    await new EventReader(await startTurn(a!.url, 'setup-cluster-refused', 'first')).all();

    const { response: refused } = await holdSetUp(a!.url, 'setup-cluster-refused', 'second');
    const resumed = fetch(`${b!.url}/v1/chat/setup-cluster-refused/stream`, { headers: key });
    expect(await after(resumed, 1_000)).toBe('waiting');
    // The chat is deleted meanwhile (through B): the turn being set up on A is refused, nothing runs.
    const deleted = await fetch(`${b!.url}/v1/chats/setup-cluster-refused`, {
      method: 'DELETE',
      headers: key,
    });
    expect(deleted.status).toBeLessThan(300);
    setUp.resolve();
    expect((await refused).status).toBe(404);
    const refusedAt = Date.now();
    // Told by A as the turn is released, not at the end of the wait's bound (the upstream timeout).
    expect((await resumed).status).toBe(204);
    expect(Date.now() - refusedAt).toBeLessThan(5_000);
  }, 60_000);
});

describe(`stopping through one process a turn another process is setting up (${engineName})`, () => {
  it('gives the set-up up at once: the stop answers with the turn ended, its MCP server not waited for', async () => {
    const [a, b] = cluster.servers;
    await new EventReader(await startTurn(a!.url, 'setup-cluster-stop', 'first')).all();

    const { response } = await holdSetUp(a!.url, 'setup-cluster-stop', 'second');
    const stop = await fetch(`${b!.url}/v1/chat/setup-cluster-stop/stop`, { method: 'POST', headers: key });
    expect(((await stop.json()) as { data: { stopped: boolean } }).data.stopped).toBe(true);
    // Read at once through B: A has released the turn, its MCP server still holding `initialize`.
    const chat = await fetch(`${b!.url}/v1/chats/setup-cluster-stop`, { headers: key });
    expect(((await chat.json()) as { data: { chat: { active: boolean } } }).data.chat.active).toBe(false);

    const events = new EventReader(await response);
    const chunks = await events.all();
    expect(events.done).toBe(true);
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', messageMetadata: { finishReason: 'stopped' } });
    // The server was given up for the stop, not waited for until the connect timeout (5 s, within
    // the stop's 10 s bound): no `mcp_timeout` warning names it.
    const warned = chunks.flatMap((chunk) =>
      chunk.type === 'data-warnings' ? (chunk.data as Array<{ tool: string }>) : [],
    );
    expect(warned.map((warning) => warning.tool)).not.toContain('live');
    setUp.resolve();
  }, 60_000);
});

// Last: it kills one process and stops the other.
/**
 * A reply resumed through process B while process A generates it; A is killed. B's replay gets no
 * end from A: it must not hold B's shutdown (nor its client) for ever.
 */
describe(`a chat whose reply's process was killed (${engineName})`, () => {
  it('is not active and has no reply to stop or resume, at once, on every process still running', async () => {
    // The third process is killed mid-reply; the first two stand for those that live on or restart.
    const [a, b, c] = cluster.servers;
    const { chatId } = await startReply(c!.url, 'killed-reply', 1);
    const chatOn = async (url: string) =>
      (
        (await (await fetch(`${url}/v1/chats/${chatId}`, { headers: key })).json()) as {
          data: { chat: unknown };
        }
      ).data.chat;
    expect(await chatOn(a!.url)).toMatchObject({ active: true });
    await c!.stop('SIGKILL');
    for (const server of [a!, b!]) {
      // Not after the markers' 30 s expiry: the reply is gone with its process.
      expect(await chatOn(server.url)).toMatchObject({ active: false, messageCount: 1 });
      const listed = (await (await fetch(`${server.url}/v1/chats?limit=100`, { headers: key })).json()) as {
        data: { chats: Array<{ id: string; active: boolean }> };
      };
      expect(listed.data.chats.find((chat) => chat.id === chatId)).toMatchObject({ active: false });
      const stop = await fetch(`${server.url}/v1/chat/${chatId}/stop`, { method: 'POST', headers: key });
      expect(await stop.json()).toEqual({ data: { stopped: false, messageId: null } });
      expect((await fetch(`${server.url}/v1/chat/${chatId}/stream`, { headers: key })).status).toBe(204);
    }
    upstream.release();
  }, 60_000);
});

describe(`a resumed reply whose generating process crashed (${engineName})`, () => {
  it('does not keep the resuming process from shutting down (SIGTERM exits within its 15 s bound)', async () => {
    const [a, b] = cluster.servers;
    upstream.enqueue({ kind: 'held', text: 'alpha beta gamma delta', afterPieces: 1 });
    const response = await postChat(a!.url, {
      agentId: 'agt_plain',
      stream: true,
      id: 'crash-resume',
      messages: [userText('go')],
    });
    const events = new EventReader(response);
    await events.until(textDeltas(1));
    let resumed = await fetch(`${b!.url}/v1/chat/crash-resume/stream`, { headers: key });
    for (let attempt = 1; resumed.status === 204 && attempt < 5; attempt++) {
      resumed = await fetch(`${b!.url}/v1/chat/crash-resume/stream`, { headers: key });
    }
    expect(resumed.status).toBe(200);
    const replay = new EventReader(resumed);
    await replay.until(textDeltas(1));
    void replay.all().catch(() => undefined);

    await a!.stop('SIGKILL');
    const started = Date.now();
    const exited = await Promise.race([
      b!.stop('SIGTERM').then(() => `exited after ${Math.round((Date.now() - started) / 1000)} s`),
      new Promise((resolve) => setTimeout(() => resolve('still running after 25 s'), 25_000)),
    ]);
    expect(exited).toMatch(/^exited/);
  }, 60_000);
});
