import { tool } from 'ai';
import { z } from 'zod';

export const REMEMBER_TOOL = 'remember';
const NOTE_MAX = 4_000;

/** The built-in tool of project chats: appends a markdown note to the project's memory. */
export function rememberTool(append: (note: string) => Promise<void>) {
  return tool({
    description:
      "Save a short markdown note to this project's memory so that future conversations in the project can use it.",
    inputSchema: z.object({
      note: z.string().min(1).max(NOTE_MAX).describe('The note to remember, in markdown'),
    }),
    execute: async ({ note }) => {
      await append(note.trim());
      return { saved: true };
    },
  });
}
