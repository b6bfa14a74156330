import { AbstractChat, type ChatInit, type ChatState, type ChatStatus, type UIMessage } from 'ai';

/**
 * The AI SDK's own chat (what `useChat` wraps) on a plain in-memory state: a test drives the
 * client's real logic (what it keeps, drops and sends on send, edit, regenerate) without React.
 */
export class NodeChat extends AbstractChat<UIMessage> {
  constructor(init: Omit<ChatInit<UIMessage>, 'messages'> & { messages?: UIMessage[] }) {
    const state: ChatState<UIMessage> = {
      status: 'ready' as ChatStatus,
      error: undefined,
      messages: init.messages ?? [],
      pushMessage: (message) => {
        state.messages = [...state.messages, message];
      },
      popMessage: () => {
        state.messages = state.messages.slice(0, -1);
      },
      replaceMessage: (index, message) => {
        state.messages = state.messages.map((old, i) => (i === index ? message : old));
      },
      snapshot: (value) => structuredClone(value),
    };
    super({ ...init, state });
  }
}
