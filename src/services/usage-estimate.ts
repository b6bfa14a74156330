/**
 * Tokens Atrium counts without the provider's word: a request's reservation before it runs, and
 * the part of a reply the provider reported no usage for (a reply cut short, a provider that sends
 * no usage). One estimator for both, so a stopped reply is charged as its reservation assumed.
 */

/** About four characters a token. */
const CHARS_PER_TOKEN = 4;

/** Tokens of `characters` characters of prompt or output. */
export function estimateTokens(characters: number): number {
  return Math.ceil(characters / CHARS_PER_TOKEN);
}

/**
 * A prompt's tokens, estimated from its length as JSON. Binary file data (a `Uint8Array`, which
 * JSON would spell as one number a byte) counts as the base64 text a provider is sent.
 */
export function estimatePromptTokens(prompt: { system: string | undefined; messages: unknown }): number {
  let binaryCharacters = 0;
  const json = JSON.stringify(prompt.messages, function (this: Record<string, unknown>, key, value) {
    // `this[key]` is the value before its toJSON (a Buffer's would be a list of bytes).
    const original = this[key];
    if (original instanceof Uint8Array) {
      binaryCharacters += Math.ceil(original.byteLength / 3) * 4;
      return '';
    }
    return value;
  });
  return estimateTokens((prompt.system?.length ?? 0) + (json?.length ?? 0) + binaryCharacters);
}
