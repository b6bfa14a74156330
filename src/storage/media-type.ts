// RFC 9110 token characters; a media type is `type/subtype` with optional `; name=value` parameters.
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const QUOTED = '"(?:[^"\\\\\\x00-\\x1f\\x7f]|\\\\.)*"';
const MEDIA_TYPE = new RegExp(
  `^(${TOKEN})/(${TOKEN})((?:[ \\t]*;[ \\t]*${TOKEN}=(?:${TOKEN}|${QUOTED}))*)[ \\t]*$`,
);

export function isValidMediaType(value: string): boolean {
  return MEDIA_TYPE.test(value);
}

/**
 * A media type in one canonical spelling: type, subtype and parameter names in lower case,
 * no spaces around `;` and `=`. Two headers that mean the same compare equal.
 */
export function normalizeMediaType(value: string): string | undefined {
  const match = MEDIA_TYPE.exec(value.trim());
  if (!match) return undefined;
  const params = [
    ...(match[3] ?? '').matchAll(new RegExp(`;[ \\t]*(${TOKEN})=(${TOKEN}|${QUOTED})`, 'g')),
  ].map(([, name, raw]) => `;${name!.toLowerCase()}=${raw}`);
  return `${match[1]!.toLowerCase()}/${match[2]!.toLowerCase()}${params.join('')}`;
}
