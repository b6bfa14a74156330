import type { Role } from '../db/schema.js';

/**
 * Who reads chats: owners and admins see every chat of the workspace, members their own. A
 * session token limited to some agents sees only those agents' chats (management.md).
 */
export interface ChatViewer {
  userId: string;
  seesAll: boolean;
  /** The only agents whose chats the caller sees; null: no such limit. */
  agentIds: string[] | null;
}

export function chatViewer(userId: string, role: Role | null, agentIds: string[] | null): ChatViewer {
  return { userId, seesAll: role === 'owner' || role === 'admin', agentIds };
}

export function canSeeChat(
  viewer: ChatViewer,
  chat: { created_by: string | null; agent_id: string },
): boolean {
  if (viewer.agentIds && !viewer.agentIds.includes(chat.agent_id)) return false;
  return viewer.seesAll || chat.created_by === viewer.userId;
}
