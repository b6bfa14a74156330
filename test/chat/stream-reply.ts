import type { LanguageModelV3 } from '@ai-sdk/provider';
import type { ToolSet, UIMessageChunk } from 'ai';
import { IdleTimeout } from '../../src/services/chat-idle-timeout.js';
import { type ReplyResult, streamReply } from '../../src/services/chat-reply.js';
import type { StopReason } from '../../src/services/running-replies.js';
import { ReplyUsage } from '../../src/services/reply-usage.js';

/**
 * Streams a reply of `model` to "Hi" as a chat does, without the HTTP layer; returns the chunks
 * a client reads and what is stored. `stopWhileStoring`: a stop (or shutdown) that lands while
 * the ended reply is being stored.
 */
export async function replyOf(
  model: LanguageModelV3,
  tools: ToolSet = {},
  options: { stopWhileStoring?: StopReason } = {},
): Promise<{ chunks: UIMessageChunk[]; stored: ReplyResult }> {
  const idle = new IdleTimeout(60_000, () => undefined);
  const abort = new AbortController();
  let stopReason: StopReason | undefined;
  let stored: ReplyResult | undefined;
  const chunks: UIMessageChunk[] = [];
  await new Promise<void>((resolve, reject) => {
    streamReply(
      {
        model,
        system: undefined,
        messages: [{ role: 'user', content: 'Hi' }],
        temperature: 0,
        tools,
        abortSignal: abort.signal,
        idle,
        stopReason: () => stopReason,
        usage: new ReplyUsage(),
      },
      {
        chatId: 'cht_1',
        messageId: 'msg_1',
        modelId: 'mock',
        leading: [],
        extraUsage: { inputTokens: 0, outputTokens: 0 },
        onEnd: async (result) => {
          idle.clear();
          stored = result;
          if (options.stopWhileStoring) {
            stopReason = options.stopWhileStoring;
            abort.abort();
          }
          return { stored: true };
        },
      },
      { chunk: (value) => chunks.push(value), end: resolve, fail: reject },
    );
  });
  return { chunks, stored: stored! };
}
