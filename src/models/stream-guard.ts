import type { LanguageModelV3, LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { wrapLanguageModel } from 'ai';

/**
 * A provider stream that breaks mid-way (connection reset, truncated body) errors the stream
 * itself, which the AI SDK passes on as a broken UI stream: no `error` chunk, no finish, no
 * persistence. This turns such a failure into an `error` part, the way the SDK reports a
 * provider failure, so the reply ends cleanly with an `error` chunk.
 */
function guard(stream: ReadableStream<LanguageModelV3StreamPart>): ReadableStream<LanguageModelV3StreamPart> {
  const reader = stream.getReader();
  return new ReadableStream<LanguageModelV3StreamPart>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (error) {
        controller.enqueue({ type: 'error', error });
        controller.close();
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

export function withStreamFailuresAsErrors(model: LanguageModelV3): LanguageModelV3 {
  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: 'v3',
      wrapStream: async ({ doStream }) => {
        const result = await doStream();
        return { ...result, stream: guard(result.stream) };
      },
    },
  });
}
