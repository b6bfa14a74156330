import { expect, it } from 'vitest';
import { queryTerms } from '../../src/knowledge/search.js';
import { turnQuery } from '../../src/services/chat-context.js';
import type { ConversationMessage } from '../../src/services/chat-messages.js';

const user = (text: string): ConversationMessage => ({
  id: 'm',
  role: 'user',
  parts: [{ type: 'text', text }],
});

it('searches a short follow-up with the message before it, keeping the follow-up’s own words', () => {
  expect(turnQuery([user('How do I install the agent?'), user('and for Linux?')])).toBe(
    'and for Linux? How do I install the agent?',
  );
  // A long earlier message is what gets cut (the query keeps 1,000 characters and 32 words).
  const many = `${Array.from({ length: 40 }, (_, i) => `topic${i}`).join(' ')} how do I install it?`;
  expect(queryTerms(turnQuery([user(many), user('and Kubernetes?')]))).toContain('kubernetes');
  const long = `${'word '.repeat(300)}install`;
  expect(turnQuery([user(long), user('and for Linux?')]).startsWith('and for Linux?')).toBe(true);
  // A question of its own is searched alone.
  expect(turnQuery([user('Unrelated'), user('Which ports does the gateway listen on?')])).toBe(
    'Which ports does the gateway listen on?',
  );
});
