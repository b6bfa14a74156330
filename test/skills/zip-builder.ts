import yazl from 'yazl';

export interface ZipEntrySpec {
  name: string;
  content?: string | Buffer;
  /** Unix mode bits, e.g. 0o120777 for a symbolic link. */
  mode?: number;
  compress?: boolean;
  directory?: boolean;
}

/** A real zip archive, written by yazl. */
export function buildZip(entries: ZipEntrySpec[]): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const entry of entries) {
    if (entry.directory) {
      zip.addEmptyDirectory(entry.name, { mtime: new Date('2026-01-01T00:00:00Z') });
      continue;
    }
    const content =
      typeof entry.content === 'string' ? Buffer.from(entry.content) : (entry.content ?? Buffer.alloc(0));
    zip.addBuffer(content, entry.name, {
      mtime: new Date('2026-01-01T00:00:00Z'),
      ...(entry.mode !== undefined ? { mode: entry.mode } : {}),
      compress: entry.compress ?? true,
    });
  }
  zip.end();
  const chunks: Buffer[] = [];
  return new Promise((resolve, reject) => {
    zip.outputStream.on('data', (chunk: Buffer) => chunks.push(chunk));
    zip.outputStream.on('end', () => resolve(Buffer.concat(chunks)));
    zip.outputStream.on('error', reject);
  });
}

/**
 * Replaces every occurrence of `from` with `to` (same length) in the archive bytes: how the
 * tests write names that no honest zip writer produces (`..`, backslashes, NUL).
 */
export function replaceBytes(zip: Buffer, from: string, to: string | Buffer): Buffer {
  const needle = Buffer.from(from);
  const replacement = typeof to === 'string' ? Buffer.from(to) : to;
  if (needle.length !== replacement.length) throw new Error('replacement must keep the length');
  const out = Buffer.from(zip);
  let found = 0;
  for (let at = out.indexOf(needle); at !== -1; at = out.indexOf(needle, at + needle.length)) {
    replacement.copy(out, at);
    found++;
  }
  if (found === 0) throw new Error(`"${from}" not found in the archive`);
  return out;
}

const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;

/** Rewrites header fields of the entry named `name`, in its local and central headers. */
export function patchEntry(
  zip: Buffer,
  name: string,
  patch: { uncompressedSize?: number; setFlags?: number; clearFlags?: number },
): Buffer {
  const out = Buffer.from(zip);
  const nameBytes = Buffer.from(name);
  let patched = 0;
  for (let at = 0; at < out.length - 4; at++) {
    const signature = out.readUInt32LE(at);
    if (signature === LOCAL) {
      const nameLength = out.readUInt16LE(at + 26);
      if (!out.subarray(at + 30, at + 30 + nameLength).equals(nameBytes)) continue;
      if (patch.setFlags) out.writeUInt16LE(out.readUInt16LE(at + 6) | patch.setFlags, at + 6);
      if (patch.clearFlags) out.writeUInt16LE(out.readUInt16LE(at + 6) & ~patch.clearFlags, at + 6);
      if (patch.uncompressedSize !== undefined) out.writeUInt32LE(patch.uncompressedSize, at + 22);
      patched++;
    } else if (signature === CENTRAL) {
      const nameLength = out.readUInt16LE(at + 28);
      if (!out.subarray(at + 46, at + 46 + nameLength).equals(nameBytes)) continue;
      if (patch.setFlags) out.writeUInt16LE(out.readUInt16LE(at + 8) | patch.setFlags, at + 8);
      if (patch.clearFlags) out.writeUInt16LE(out.readUInt16LE(at + 8) & ~patch.clearFlags, at + 8);
      if (patch.uncompressedSize !== undefined) out.writeUInt32LE(patch.uncompressedSize, at + 24);
      patched++;
    }
  }
  if (patched === 0) throw new Error(`entry ${name} not found`);
  return out;
}

export function skillMd(name: string | undefined, description: string, extra = ''): string {
  const nameLine = name === undefined ? '' : `name: ${name}\n`;
  return `---\n${nameLine}description: ${description}\n${extra}---\n\n# ${name ?? 'Skill'}\n\nDo the thing.\n`;
}

export interface MultipartPart {
  name: string;
  filename?: string;
  contentType?: string;
  content: string | Buffer;
}

/** A multipart/form-data body, written by hand so tests control every byte. */
export function multipartBody(parts: MultipartPart[], boundary = `----atrium${Date.now().toString(16)}`) {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    let header = `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"`;
    if (part.filename !== undefined) header += `; filename="${part.filename}"`;
    header += '\r\n';
    if (part.contentType) header += `Content-Type: ${part.contentType}\r\n`;
    chunks.push(Buffer.from(`${header}\r\n`));
    chunks.push(typeof part.content === 'string' ? Buffer.from(part.content) : part.content);
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}
