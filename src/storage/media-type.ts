// RFC 9110 token characters; a media type is `type/subtype` with optional `; name=value` parameters.
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
// A quoted string as RFC 9110 5.6.4 has it (qdtext and quoted pairs of a tab, space or byte
// above 0x20): a header with any other character is refused by HTTP clients and parsers, so a
// URL signed for it could never be used.
const QUOTED = '"(?:[\\t\\x20\\x21\\x23-\\x5b\\x5d-\\x7e\\x80-\\xff]|\\\\[\\t\\x20-\\x7e\\x80-\\xff])*"';
const MEDIA_TYPE = new RegExp(
  `^(${TOKEN})/(${TOKEN})((?:[ \\t]*;[ \\t]*${TOKEN}=(?:${TOKEN}|${QUOTED}))*)[ \\t]*$`,
);

const WHOLE_TOKEN = new RegExp(`^${TOKEN}$`);

export function isValidMediaType(value: string): boolean {
  return MEDIA_TYPE.test(value);
}

/**
 * A media type in one canonical spelling: type, subtype and parameter names in lower case,
 * no spaces around `;` and `=`, and a `charset` value in lower case unquoted (RFC 9110 8.3.2:
 * charset names are case-insensitive; browsers send `charset=UTF-8`). Two headers that mean
 * the same compare equal.
 */
export function normalizeMediaType(value: string): string | undefined {
  const match = MEDIA_TYPE.exec(value.trim());
  if (!match) return undefined;
  const params = [
    ...(match[3] ?? '').matchAll(new RegExp(`;[ \\t]*(${TOKEN})=(${TOKEN}|${QUOTED})`, 'g')),
  ].map(([, rawName, raw]) => {
    const name = rawName!.toLowerCase();
    return `;${name}=${name === 'charset' ? charsetValue(raw!) : raw}`;
  });
  return `${match[1]!.toLowerCase()}/${match[2]!.toLowerCase()}${params.join('')}`;
}

/** A charset parameter's value compared case-insensitively: `"UTF-8"` and `utf-8` are one charset. */
function charsetValue(raw: string): string {
  const unquoted = raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw;
  return WHOLE_TOKEN.test(unquoted) ? unquoted.toLowerCase() : raw;
}
