/**
 * `attachment; filename="…"; filename*=UTF-8''…` (RFC 6266): an ASCII fallback for old
 * clients, the exact name for everyone else. Quotes, backslashes and control characters never
 * reach the header unescaped.
 */
export function contentDisposition(filename: string, kind: 'attachment' | 'inline' = 'attachment'): string {
  const fallback = filename.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const encoded = encodeURIComponent(filename).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `${kind}; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}
