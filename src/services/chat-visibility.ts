import type { Role } from '../db/schema.js';

/** Who reads chats: owners and admins see every chat of the workspace, members their own. */
export interface ChatViewer {
  userId: string;
  seesAll: boolean;
}

export function chatViewer(userId: string, role: Role | null): ChatViewer {
  return { userId, seesAll: role === 'owner' || role === 'admin' };
}

export function canSeeChat(viewer: ChatViewer, chat: { created_by: string | null }): boolean {
  return viewer.seesAll || chat.created_by === viewer.userId;
}
