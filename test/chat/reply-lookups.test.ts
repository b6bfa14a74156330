import { beforeEach, describe, expect, it } from 'vitest';
import { commitOnOtherConnection, type TestApp } from '../helpers/app.js';
import { type FakeUpstream } from '../helpers/fake-upstream.js';
import { postChat, UPSTREAM_KEY, useChatApp, userText } from './fixtures.js';

let upstream: FakeUpstream;
let t: TestApp;

useChatApp((app) => ({ upstream, t } = app));
beforeEach(() => {
  upstream.requests.length = 0;
});

/** A reply of agt_helper for the main key's owner (usr_olivia): the system prompt and model the provider got. */
async function reply() {
  const res = await postChat(t, { agentId: 'agt_helper', messages: [userText('hi')] });
  if (res.statusCode !== 200) return { status: res.statusCode, system: undefined, model: undefined };
  const sent = upstream.lastRequest().body;
  return { status: res.statusCode, system: sent.messages?.[0]?.content, model: sent.model };
}

describe('the agent, the key owner and the model a reply reads (kept in memory between replies)', () => {
  it('are read as they are now: a change in this process or committed on another connection reaches the next reply', async () => {
    const first = await reply();
    expect(first.system).toMatch(/^You help Olivia \(olivia@acme\.test, usr_olivia\)/);
    expect(first.model).toBe('small-1');
    expect((await reply()).system).toBe(first.system);

    await t.db.updateTable('users').set({ name: 'Olivia B' }).where('id', '=', 'usr_olivia').execute();
    expect((await reply()).system).toMatch(/^You help Olivia B /);
    await commitOnOtherConnection(t.env, (db) =>
      db.updateTable('users').set({ name: 'Olivia C' }).where('id', '=', 'usr_olivia').execute(),
    );
    expect((await reply()).system).toMatch(/^You help Olivia C /);

    await commitOnOtherConnection(t.env, (db) =>
      db
        .updateTable('agents')
        .set({ instructions: 'Now {{user.name}} only.' })
        .where('id', '=', 'agt_helper')
        .execute(),
    );
    expect((await reply()).system).toBe('Now Olivia C only.');

    await t.db
      .updateTable('models')
      .set({ provider_model: 'small-2' })
      .where('id', '=', 'fake-small')
      .execute();
    expect((await reply()).model).toBe('small-2');
    await commitOnOtherConnection(t.env, (db) =>
      db.updateTable('models').set({ provider_model: 'small-3' }).where('id', '=', 'fake-small').execute(),
    );
    expect((await reply()).model).toBe('small-3');

    // The provider's key and address are read with the model: rotating the key on another
    // connection (`atrium apply` beside a running server) reaches the next reply too.
    const bearer = () => upstream.requests.at(-1)?.headers.authorization;
    await reply();
    expect(bearer()).toBe(`Bearer ${UPSTREAM_KEY}`);
    await commitOnOtherConnection(t.env, (db) =>
      db.updateTable('providers').set({ api_key: 'rotated-provider-key' }).where('id', '=', 'fake').execute(),
    );
    await reply();
    expect(bearer()).toBe('Bearer rotated-provider-key');

    await commitOnOtherConnection(t.env, (db) =>
      db
        .updateTable('agents')
        .set({ deleted_at: new Date().toISOString() })
        .where('id', '=', 'agt_helper')
        .execute(),
    );
    expect((await reply()).status).toBe(404);
  });
});
