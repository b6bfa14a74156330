import { describe, expect, it } from 'vitest';
import { estimatePromptTokens, IMAGE_TOKENS } from '../../src/services/usage-estimate.js';

/** About 1 MB of file data, in each form a prompt may carry it. */
const bytes = new Uint8Array(1_000_000).fill(7);
const base64 = Buffer.from(bytes).toString('base64');

function tokensOf(part: Record<string, unknown>): number {
  const text = { type: 'text', text: 'What is this?' };
  return estimatePromptTokens({ system: undefined, messages: [{ role: 'user', content: [text, part] }] });
}

describe('estimatePromptTokens', () => {
  // What reaches it: the request's model messages (reservations), and the prompt the AI SDK
  // sends the provider (a reply's steps without reported usage).
  it.each([
    [
      'a file part with a data: URL (a /v1/chat file part)',
      { type: 'file', mediaType: 'image/png', data: `data:image/png;base64,${base64}` },
    ],
    [
      'an image part with a data: URL (a /v1/openai image_url)',
      { type: 'image', image: new URL(`data:image/png;base64,${base64}`) },
    ],
    [
      'a file part with base64 data (the provider prompt)',
      { type: 'file', mediaType: 'image/png', data: base64 },
    ],
    ['a file part with bytes (the provider prompt)', { type: 'file', mediaType: 'IMAGE/JPEG', data: bytes }],
    [
      'a file part with an https: URL',
      { type: 'file', mediaType: 'image/*', data: new URL('https://example.com/cat.png') },
    ],
  ])('counts an image as a bounded number of tokens: %s', (_form, part) => {
    const tokens = tokensOf(part);
    expect(tokens).toBeGreaterThanOrEqual(IMAGE_TOKENS);
    expect(tokens).toBeLessThan(IMAGE_TOKENS + 50);
  });

  it('counts other binary files as the base64 text a provider is sent', () => {
    expect(tokensOf({ type: 'file', mediaType: 'application/pdf', data: bytes })).toBeGreaterThan(
      base64.length / 4,
    );
    expect(tokensOf({ type: 'file', mediaType: 'application/pdf', data: base64 })).toBeGreaterThan(
      base64.length / 4,
    );
  });

  it('counts an image inside a tool result as its text: it is sent to the model as JSON', () => {
    const result = {
      type: 'tool-result',
      toolCallId: 'call_1',
      toolName: 'screenshot',
      output: { type: 'json', value: { content: [{ type: 'image', data: base64, mimeType: 'image/png' }] } },
    };
    const tokens = estimatePromptTokens({
      system: undefined,
      messages: [{ role: 'tool', content: [result] }],
    });
    expect(tokens).toBeGreaterThan(base64.length / 4);
  });
});
