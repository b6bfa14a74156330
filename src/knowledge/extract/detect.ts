import type { ExtractFormat } from '../types.js';

/** What to do with a file: extract it as a format, or leave it unindexed with a reason. */
export type Detected = { format: ExtractFormat } | { unsupported: string };

const FORMAT_BY_EXTENSION: Record<string, ExtractFormat> = {
  txt: 'text',
  text: 'text',
  log: 'text',
  rst: 'text',
  adoc: 'text',
  md: 'markdown',
  markdown: 'markdown',
  mdx: 'markdown',
  csv: 'csv',
  tsv: 'tsv',
  tab: 'tsv',
  json: 'json',
  jsonl: 'json',
  ndjson: 'json',
  geojson: 'json',
  html: 'html',
  htm: 'html',
  xhtml: 'html',
  pdf: 'pdf',
  docx: 'docx',
  xlsx: 'xlsx',
  xlsm: 'xlsx',
};

const CODE_EXTENSIONS = new Set(
  (
    'js mjs cjs ts mts cts tsx jsx py pyi rb go rs java kt kts c h cc cpp cxx hpp cs fs php sh bash zsh fish ps1 ' +
    'sql swift scala r lua pl pm ex exs erl hrl hs ml mli clj dart groovy gradle vue svelte astro css scss sass less ' +
    'yaml yml toml ini cfg conf env properties xml xsd proto graphql gql tf hcl nix zig jl m mm vb bat cmake mk'
  ).split(' '),
);

/** Files known by name whose contents are code or configuration. */
const CODE_FILE_NAMES = new Set([
  'dockerfile',
  'makefile',
  'gemfile',
  'rakefile',
  'procfile',
  'jenkinsfile',
  '.gitignore',
  '.dockerignore',
  '.editorconfig',
  '.env',
]);

const UNSUPPORTED_BY_EXTENSION: Array<[string, string]> = [
  ['png jpg jpeg gif webp bmp tif tiff ico icns heic heif avif svg psd raw', 'images are not indexed'],
  ['mp3 wav ogg oga flac m4a aac opus mid midi', 'audio files are not indexed'],
  ['mp4 m4v mov avi mkv webm wmv flv mpg mpeg', 'video files are not indexed'],
  ['zip gz tgz tar bz2 xz 7z rar zst lz4 jar war apk dmg iso', 'archives are not indexed'],
  ['doc xls ppt pptx odt ods odp key numbers pages rtf epub', 'this document format is not indexed'],
  [
    'exe dll so dylib bin o a obj class pyc wasm woff woff2 ttf otf eot sqlite sqlite3 db parquet avro pkl npy',
    'binary files are not indexed',
  ],
];
const UNSUPPORTED_EXTENSIONS = new Map(
  UNSUPPORTED_BY_EXTENSION.flatMap(([list, reason]) => list.split(' ').map((ext) => [ext, reason])),
);

const FORMAT_BY_MEDIA_TYPE: Record<string, ExtractFormat> = {
  'text/plain': 'text',
  'text/markdown': 'markdown',
  'text/x-markdown': 'markdown',
  'text/csv': 'csv',
  'text/tab-separated-values': 'tsv',
  'application/json': 'json',
  'application/x-ndjson': 'json',
  'text/html': 'html',
  'application/xhtml+xml': 'html',
  'application/pdf': 'pdf',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'docx',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet': 'xlsx',
  'application/javascript': 'code',
  'application/typescript': 'code',
  'application/xml': 'code',
  'text/xml': 'code',
  'application/yaml': 'code',
  'application/x-yaml': 'code',
  'application/toml': 'code',
  'application/sql': 'code',
  'application/x-sh': 'code',
};

const BINARY_FORMATS = new Set<ExtractFormat>(['pdf', 'docx', 'xlsx']);

/**
 * Decides how a file is extracted, from its extension first (stored media types are often
 * generic), then its media type, then its first bytes. A text format named so is read as text
 * unless its bytes really are binary: `MZ,Mozambique` opening a `.csv` or `%PDF-` opening a
 * `.md` are text that happens to spell a magic number, while an image renamed `.md` is still
 * not fed to the Markdown extractor. Only a file whose name and type say nothing goes by its
 * magic number.
 */
export function detectFormat(path: string, mediaType: string, bytes: Uint8Array): Detected {
  const name = path.slice(path.lastIndexOf('/') + 1).toLowerCase();
  const dot = name.lastIndexOf('.');
  const extension = dot > 0 ? name.slice(dot + 1) : '';
  const media = mediaType.split(';')[0].trim().toLowerCase();

  let format: ExtractFormat | undefined =
    FORMAT_BY_EXTENSION[extension] ??
    (CODE_EXTENSIONS.has(extension) || CODE_FILE_NAMES.has(name) ? 'code' : undefined);
  if (!format) {
    const reason = UNSUPPORTED_EXTENSIONS.get(extension) ?? unsupportedMediaType(media);
    if (reason) return { unsupported: reason };
    format = FORMAT_BY_MEDIA_TYPE[media];
  }
  if (format && BINARY_FORMATS.has(format)) return { format };

  const magic = sniffMagic(bytes);
  if (format) {
    if (!looksBinary(bytes)) return { format };
    return {
      unsupported: magic && magic !== 'pdf' ? UNSUPPORTED_MAGIC[magic] : 'binary files are not indexed',
    };
  }
  if (magic === 'pdf') return { format: 'pdf' };
  if (magic) return { unsupported: UNSUPPORTED_MAGIC[magic] };
  if (looksBinary(bytes)) return { unsupported: 'binary files are not indexed' };
  return { format: 'text' };
}

function unsupportedMediaType(media: string): string | null {
  if (media.startsWith('image/')) return 'images are not indexed';
  if (media.startsWith('audio/')) return 'audio files are not indexed';
  if (media.startsWith('video/')) return 'video files are not indexed';
  if (media.startsWith('font/')) return 'binary files are not indexed';
  if (/zip|gzip|x-tar|x-7z|x-rar|x-bzip|x-xz|zstd/.test(media)) return 'archives are not indexed';
  return null;
}

type Magic = 'pdf' | 'zip' | 'gzip' | 'image' | 'executable';

const UNSUPPORTED_MAGIC: Record<Exclude<Magic, 'pdf'>, string> = {
  zip: 'archives are not indexed',
  gzip: 'archives are not indexed',
  image: 'images are not indexed',
  executable: 'binary files are not indexed',
};

function startsWith(bytes: Uint8Array, ...prefix: number[]): boolean {
  return prefix.every((b, i) => bytes[i] === b);
}

function sniffMagic(bytes: Uint8Array): Magic | null {
  if (startsWith(bytes, 0x25, 0x50, 0x44, 0x46, 0x2d)) return 'pdf'; // %PDF-
  if (startsWith(bytes, 0x50, 0x4b, 0x03, 0x04)) return 'zip';
  if (startsWith(bytes, 0x1f, 0x8b)) return 'gzip';
  if (
    startsWith(bytes, 0x89, 0x50, 0x4e, 0x47) || // PNG
    startsWith(bytes, 0xff, 0xd8, 0xff) || // JPEG
    startsWith(bytes, 0x47, 0x49, 0x46, 0x38) || // GIF8
    (startsWith(bytes, 0x52, 0x49, 0x46, 0x46) && bytes[8] === 0x57 && bytes[9] === 0x45) // RIFF….WEBP
  ) {
    return 'image';
  }
  if (startsWith(bytes, 0x7f, 0x45, 0x4c, 0x46) || startsWith(bytes, 0x4d, 0x5a)) return 'executable'; // ELF, MZ
  return null;
}

/**
 * True when the first 8 KiB hold a NUL byte (outside UTF-16 text) or mostly control characters:
 * the usual test text tools use to tell text from binary.
 */
export function looksBinary(bytes: Uint8Array): boolean {
  if (startsWith(bytes, 0xff, 0xfe) || startsWith(bytes, 0xfe, 0xff)) return false; // UTF-16 BOM
  const sample = bytes.subarray(0, 8192);
  let control = 0;
  for (const byte of sample) {
    if (byte === 0) return true;
    if (byte < 0x09 || (byte > 0x0d && byte < 0x20 && byte !== 0x1b)) control++;
  }
  return sample.length > 0 && control / sample.length > 0.1;
}
