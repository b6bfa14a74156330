/**
 * Tokens Atrium counts without the provider's word: a request's reservation before it runs, and
 * the part of a reply the provider reported no usage for (a reply cut short, a provider that sends
 * no usage). One estimator for both, so a stopped reply is charged as its reservation assumed.
 */

/** About four characters a token. */
const CHARS_PER_TOKEN = 4;

/**
 * Tokens of one image in a prompt, whatever its size. Providers bill an image by its pixels, not
 * its bytes, and scale a large one down first: Anthropic at width × height / 750, at most about
 * 1,600 tokens; OpenAI at 85 + 170 per 512-pixel tile, under 1,500 once scaled (765 for
 * 1024 × 1024). Its base64 text at four characters a token made a 1 MB photo some 330,000 tokens.
 */
export const IMAGE_TOKENS = 1600;

/** Tokens of `characters` characters of prompt or output. */
export function estimateTokens(characters: number): number {
  return Math.ceil(characters / CHARS_PER_TOKEN);
}

/**
 * An image part of a message: the AI SDK's `image` part (the /v1/openai door's `image_url`), or
 * a `file` part of an `image/*` type, its data given in any form (bytes, base64, a data: or
 * https: URL). Only the messages' own parts: an image inside a tool's result is sent to the model
 * as the result's JSON text, and billed as text.
 */
function isImagePart(part: unknown): boolean {
  if (typeof part !== 'object' || part === null) return false;
  const { type, mediaType } = part as { type?: unknown; mediaType?: unknown };
  return (
    type === 'image' || (type === 'file' && typeof mediaType === 'string' && /^image\//i.test(mediaType))
  );
}

function imageParts(messages: unknown): Set<unknown> {
  const images = new Set<unknown>();
  if (!Array.isArray(messages)) return images;
  for (const message of messages) {
    const content = (message as { content?: unknown } | null)?.content;
    if (Array.isArray(content)) for (const part of content) if (isImagePart(part)) images.add(part);
  }
  return images;
}

/**
 * A prompt's tokens, estimated from its length as JSON. An image counts as `IMAGE_TOKENS`; other
 * binary file data (a `Uint8Array`, which JSON would spell as one number a byte) counts as the
 * base64 text a provider is sent.
 */
export function estimatePromptTokens(prompt: { system: string | undefined; messages: unknown }): number {
  const images = imageParts(prompt.messages);
  let imageCount = 0;
  let binaryCharacters = 0;
  const json = JSON.stringify(prompt.messages, function (this: Record<string, unknown>, key, value) {
    // `this[key]` is the value before its toJSON (a Buffer's would be a list of bytes).
    const original = this[key];
    if (images.has(original)) {
      imageCount++;
      return '';
    }
    if (original instanceof Uint8Array) {
      binaryCharacters += Math.ceil(original.byteLength / 3) * 4;
      return '';
    }
    return value;
  });
  return (
    estimateTokens((prompt.system?.length ?? 0) + (json?.length ?? 0) + binaryCharacters) +
    imageCount * IMAGE_TOKENS
  );
}
