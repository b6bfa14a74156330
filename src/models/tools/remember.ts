import { tool } from 'ai';
import { z } from 'zod';
import { MAX_PROJECT_MEMORY_LENGTH } from '../../limits.js';

export const REMEMBER_TOOL = 'remember';
const NOTE_MAX = 4_000;

/**
 * The built-in tool of project chats: appends a markdown note to the project's memory. A note
 * that would take the memory past its limit is not saved, and the model is told why (so it can
 * tell the user, who can shorten the memory), as it is when the project is gone.
 */
export function rememberTool(append: (note: string) => Promise<'appended' | 'full' | 'missing'>) {
  return tool({
    description:
      "Save a short markdown note to this project's memory so that future conversations in the project can use it.",
    inputSchema: z.object({
      note: z.string().min(1).max(NOTE_MAX).describe('The note to remember, in markdown'),
    }),
    execute: async ({ note }) => {
      // NUL dropped: PostgreSQL text cannot hold it, and SQLite's `length` (the limit's count)
      // stops at it. The note comes from the model, past no input check of the API.
      const text = note.replaceAll('\0', '').trim();
      if (text === '') return { saved: false, reason: 'The note is empty' };
      const outcome = await append(text);
      if (outcome === 'appended') return { saved: true };
      return {
        saved: false,
        reason:
          outcome === 'full'
            ? `The project's memory is full (${MAX_PROJECT_MEMORY_LENGTH.toLocaleString('en')} characters); nothing more can be saved until it is shortened by editing the project's memory`
            : 'The project no longer exists',
      };
    },
  });
}
