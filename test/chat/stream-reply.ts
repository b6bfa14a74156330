import type { LanguageModelV3 } from '@ai-sdk/provider';
import type { ToolSet, UIMessageChunk } from 'ai';
import { IdleTimeout } from '../../src/services/chat-idle-timeout.js';
import { type ReplyCall, type ReplyResult, streamReply } from '../../src/services/chat-reply.js';
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
  options: {
    stopWhileStoring?: StopReason;
    /** `sdk`: through `streamText` even when no tools are offered (chat-reply.ts). */
    pipeline?: 'sdk';
    /** The turn's call, as a chat would make it (defaults: no system, "Hi", temperature 0). */
    call?: Partial<Pick<ReplyCall, 'system' | 'messages' | 'temperature' | 'options'>>;
    /** Stops the reply (as `POST …/stop` does) once the client has read this many chunks (0: before it starts). */
    stopAfterChunks?: number;
    /**
     * The stop lands in a later turn of the event loop (as a stop request, a shutdown or the idle
     * timer does), not while the client's chunk is being handed on.
     */
    stopLater?: boolean;
    /** The upstream idle timeout, aborting the reply as a chat's does (default 60 s). */
    idleTimeoutMs?: number;
    /** Where the chunks a client reads are kept (also when the reply's stream fails). */
    chunks?: UIMessageChunk[];
  } = {},
): Promise<{ chunks: UIMessageChunk[]; stored: ReplyResult }> {
  const abort = new AbortController();
  const idle = new IdleTimeout(options.idleTimeoutMs ?? 60_000, () =>
    abort.abort(new Error('upstream timeout')),
  );
  let stopReason: StopReason | undefined;
  let stored: ReplyResult | undefined;
  const chunks: UIMessageChunk[] = options.chunks ?? [];
  const stop = () => {
    stopReason = 'stopped';
    abort.abort(new Error('reply stopped'));
  };
  if (options.stopAfterChunks === 0) stop();
  await new Promise<void>((resolve, reject) => {
    streamReply(
      {
        model,
        system: undefined,
        messages: [{ role: 'user', content: 'Hi' }],
        temperature: 0,
        ...options.call,
        tools,
        abortSignal: abort.signal,
        abort: () => abort.abort(new Error('reply failed')),
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
        ...(options.pipeline ? { pipeline: options.pipeline } : {}),
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
      {
        chunk: (value) => {
          chunks.push(value);
          if (chunks.length === options.stopAfterChunks) {
            if (options.stopLater) setImmediate(stop);
            else stop();
          }
        },
        end: resolve,
        fail: reject,
      },
    );
  });
  return { chunks, stored: stored! };
}
