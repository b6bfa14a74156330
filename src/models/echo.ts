import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Prompt,
  LanguageModelV3StreamPart,
  LanguageModelV3Usage,
} from '@ai-sdk/provider';
import { parseSystemPrompt } from './context.js';

/** The built-in offline model's id: every workspace may use it, at no cost. */
export const ECHO_MODEL_ID = 'atrium/echo';
export const ECHO_LABEL = '[atrium/echo: development model, no AI]';
const QUOTE_LIMIT = 300;

function quote(text: string | undefined): string {
  if (text === undefined || text.trim() === '') return 'none';
  const flat = text.replace(/\s+/g, ' ').trim();
  return `"${flat.length > QUOTE_LIMIT ? `${flat.slice(0, QUOTE_LIMIT)}…` : flat}"`;
}

function lastUserText(prompt: LanguageModelV3Prompt): string {
  for (let i = prompt.length - 1; i >= 0; i--) {
    const message = prompt[i];
    if (message?.role !== 'user') continue;
    return message.content
      .map((part) => (part.type === 'text' ? part.text : `[file ${part.filename ?? part.mediaType}]`))
      .join(' ');
  }
  return '';
}

/**
 * What the echo model answers: a labelled, deterministic reply that repeats the last user turn
 * and names the context it received, so that a new installation shows the whole request path
 * working without any API key.
 */
export function echoReply(prompt: LanguageModelV3Prompt): string {
  const system = prompt
    .filter((m) => m.role === 'system')
    .map((m) => m.content)
    .join('\n\n');
  const context = parseSystemPrompt(system);
  const lines = [
    `${ECHO_LABEL} You said: ${quote(lastUserText(prompt))}`,
    `Agent instructions: ${quote(context.agentInstructions)}`,
  ];
  if (context.projectInstructions !== undefined)
    lines.push(`Project instructions: ${quote(context.projectInstructions)}`);
  if (context.projectMemory !== undefined) lines.push(`Project memory: ${quote(context.projectMemory)}`);
  if (context.fileNames.length > 0) lines.push(`Project files: ${context.fileNames.join(', ')}`);
  if (context.excerpts.length > 0) lines.push(`Project excerpts: ${context.excerpts.join(', ')}`);
  return lines.join('\n');
}

/** Words with their following whitespace, so that joining the pieces gives the reply back. */
export function echoPieces(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [];
}

function promptCharacters(prompt: LanguageModelV3Prompt): number {
  let count = 0;
  for (const message of prompt) {
    if (typeof message.content === 'string') count += message.content.length;
    else for (const part of message.content) if (part.type === 'text') count += part.text.length;
  }
  return count;
}

function usageOf(prompt: LanguageModelV3Prompt, pieces: number): LanguageModelV3Usage {
  // About four characters a token, as the usual tokenizers average on English text.
  const input = Math.max(1, Math.ceil(promptCharacters(prompt) / 4));
  return {
    inputTokens: { total: input, noCache: input, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: pieces, text: pieces, reasoning: 0 },
  };
}

const FINISH = { unified: 'stop', raw: 'stop' } as const;

/** The offline development model: deterministic, streams word by word, reports usage. */
export function createEchoModel(): LanguageModelV3 {
  return {
    specificationVersion: 'v3',
    provider: 'atrium',
    modelId: 'echo',
    // Accept every URL as is: the echo model never downloads files.
    supportedUrls: { '*': [/.*/] },
    async doGenerate(options: LanguageModelV3CallOptions) {
      const text = echoReply(options.prompt);
      return {
        content: [{ type: 'text', text }],
        finishReason: FINISH,
        usage: usageOf(options.prompt, echoPieces(text).length),
        warnings: [],
      };
    },
    async doStream(options: LanguageModelV3CallOptions) {
      const pieces = echoPieces(echoReply(options.prompt));
      const usage = usageOf(options.prompt, pieces.length);
      let index = 0;
      const stream = new ReadableStream<LanguageModelV3StreamPart>({
        start(controller) {
          controller.enqueue({ type: 'stream-start', warnings: [] });
          controller.enqueue({ type: 'text-start', id: 'echo' });
        },
        pull(controller) {
          if (options.abortSignal?.aborted) {
            controller.error(options.abortSignal.reason);
            return;
          }
          const piece = pieces[index++];
          if (piece !== undefined) {
            controller.enqueue({ type: 'text-delta', id: 'echo', delta: piece });
            return;
          }
          controller.enqueue({ type: 'text-end', id: 'echo' });
          controller.enqueue({ type: 'finish', finishReason: FINISH, usage });
          controller.close();
        },
      });
      return { stream };
    },
  };
}
