import { describe, expect, it } from 'vitest';
import { parseRange } from '../../src/http/routes/storage.js';
import { contentDisposition } from '../../src/storage/content-disposition.js';
import { isValidMediaType, normalizeMediaType } from '../../src/storage/media-type.js';
import {
  createSignedUrl,
  decodeKeyPath,
  encodeKeyPath,
  verifySignedUrl,
} from '../../src/storage/signed-url.js';

const now = new Date('2026-11-22T10:00:00.000Z');
const fields = {
  method: 'PUT' as const,
  key: 'projects/w/p/a b/ü?.txt',
  contentType: 'text/plain',
  sizeBytes: 5,
  expiresAt: now.getTime() / 1000 + 900,
};

function queryOf(url: string) {
  return Object.fromEntries(new URL(url).searchParams.entries());
}

describe('signed URLs', () => {
  it('round-trips a key with spaces, unicode and reserved characters', () => {
    const url = createSignedUrl('http://host:1/', 'secret', fields);
    const parsed = new URL(url);
    expect(parsed.pathname).toBe(`/storage/objects/${encodeKeyPath(fields.key)}`);
    expect(decodeKeyPath(parsed.pathname.slice('/storage/objects/'.length))).toBe(fields.key);
    expect(verifySignedUrl('secret', 'PUT', fields.key, queryOf(url), now)).toMatchObject(fields);
  });

  it('refuses another secret or key, tells the other method apart while valid, and expires at the second for both methods', () => {
    const query = queryOf(createSignedUrl('http://h', 'secret', fields));
    expect(() => verifySignedUrl('other', 'PUT', fields.key, query, now)).toThrow(
      expect.objectContaining({ code: 'invalid_signature' }),
    );
    // Signed for PUT, sent with GET: the method is wrong, not the URL (before: invalid_signature).
    expect(() => verifySignedUrl('secret', 'GET', fields.key, query, now)).toThrow(
      expect.objectContaining({ code: 'method_not_allowed', status: 405, details: { allow: ['PUT'] } }),
    );
    // Another secret's URL matches neither method.
    expect(() => verifySignedUrl('other', 'GET', fields.key, query, now)).toThrow(
      expect.objectContaining({ code: 'invalid_signature' }),
    );
    expect(() => verifySignedUrl('secret', 'PUT', 'projects/w/p/other.txt', query, now)).toThrow(
      expect.objectContaining({ code: 'invalid_signature' }),
    );
    const atExpiry = new Date(fields.expiresAt * 1000);
    expect(() => verifySignedUrl('secret', 'PUT', fields.key, query, atExpiry)).toThrow(
      expect.objectContaining({ code: 'url_expired', status: 403 }),
    );
    // Expired and sent with the other method: the same url_expired, not a 405 whose retry fails.
    const expired = (method: 'PUT' | 'GET') => {
      try {
        verifySignedUrl('secret', method, fields.key, query, atExpiry);
      } catch (error) {
        return error;
      }
      throw new Error(`${method} was accepted`);
    };
    expect(expired('GET')).toMatchObject({ code: 'url_expired', status: 403 });
    const { code, message, details } = expired('PUT') as { code: string; message: string; details: object };
    expect(expired('GET')).toMatchObject({ code, message, details });
    // Just before expiry, the wrong method is still 405.
    expect(() =>
      verifySignedUrl('secret', 'GET', fields.key, query, new Date(fields.expiresAt * 1000 - 1)),
    ).toThrow(expect.objectContaining({ code: 'method_not_allowed', status: 405 }));
    // A tampered URL past its expiry stays invalid_signature whatever the method.
    expect(() => verifySignedUrl('other', 'GET', fields.key, query, atExpiry)).toThrow(
      expect.objectContaining({ code: 'invalid_signature' }),
    );
  });

  it('binds each field on its own: text moved from one field into the next breaks the signature', () => {
    // With fields joined by newlines, `notes\nY` + `text/plain` and `notes` + `Y\ntext/plain` signed alike.
    const signed = { ...fields, key: 'projects/w/p/notes\nY' };
    const query = queryOf(createSignedUrl('http://h', 'secret', signed));
    expect(verifySignedUrl('secret', 'PUT', signed.key, query, now)).toMatchObject(signed);
    expect(() =>
      verifySignedUrl('secret', 'PUT', 'projects/w/p/notes', { ...query, contentType: 'Y\ntext/plain' }, now),
    ).toThrow(expect.objectContaining({ code: 'invalid_signature' }));
  });

  it('refuses malformed or repeated parameters as invalid signatures', () => {
    const query = queryOf(createSignedUrl('http://h', 'secret', fields));
    for (const broken of [
      { ...query, expires: 'soon' },
      { ...query, size: '-1' },
      { ...query, signature: [query.signature, query.signature] },
      { ...query, size: undefined },
    ]) {
      expect(() => verifySignedUrl('secret', 'PUT', fields.key, broken, now)).toThrow(
        expect.objectContaining({ code: 'invalid_signature' }),
      );
    }
    expect(decodeKeyPath('a/%E0%A4%A')).toBeUndefined();
  });
});

describe('media types and headers', () => {
  it('validates and normalises MIME types', () => {
    expect(isValidMediaType('text/plain; charset="utf-8"')).toBe(true);
    expect(isValidMediaType('text/plain\r\nx: y')).toBe(false);
    // A quoted pair escapes a visible character, space or tab only: no parser takes another.
    expect(isValidMediaType('text/plain; a="\\"x"')).toBe(true);
    expect(isValidMediaType('text/plain; a="\\\u0001"')).toBe(false);
    // Nor a character above U+00FF, plain or escaped: a header value is bytes.
    expect(isValidMediaType('text/plain; a="\u0100"')).toBe(false);
    expect(isValidMediaType('text/plain; a="é"')).toBe(true);
    expect(normalizeMediaType('Text/HTML ; Charset=UTF-8')).toBe('text/html;charset=utf-8');
  });

  it('compares charset values case-insensitively, quoted or not, and other parameters exactly', () => {
    // A browser's fetch sends `text/plain;charset=UTF-8` for a type declared in lower case.
    expect(normalizeMediaType('text/plain;charset=UTF-8')).toBe(
      normalizeMediaType('text/plain; charset=utf-8'),
    );
    expect(normalizeMediaType('text/plain; charset="UTF-8"')).toBe('text/plain;charset=utf-8');
    expect(normalizeMediaType('multipart/mixed; boundary=AbC')).not.toBe(
      normalizeMediaType('multipart/mixed; boundary=abc'),
    );
  });

  it('writes a Content-Disposition that survives quotes, unicode and control characters', () => {
    expect(contentDisposition('a "b".txt')).toBe(
      `attachment; filename="a _b_.txt"; filename*=UTF-8''a%20%22b%22.txt`,
    );
    expect(contentDisposition('résumé\n.pdf')).toBe(
      `attachment; filename="r_sum__.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9%0A.pdf`,
    );
  });

  it('parses single byte ranges and ignores the rest', () => {
    expect(parseRange('bytes=0-0', 10)).toEqual({ start: 0, end: 0 });
    expect(parseRange('bytes=-100', 10)).toEqual({ start: 0, end: 9 });
    expect(parseRange('bytes=9-', 10)).toEqual({ start: 9, end: 9 });
    expect(parseRange('bytes=10-', 10)).toBeUndefined();
    expect(parseRange('bytes=5-2', 10)).toBeUndefined();
    expect(parseRange('bytes=-0', 10)).toBeUndefined();
    expect(parseRange('bytes=0-1', 0)).toBeUndefined();
    expect(parseRange(undefined, 10)).toBeUndefined();
  });
});
