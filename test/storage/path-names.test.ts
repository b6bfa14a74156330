import { describe, expect, it } from 'vitest';
import { escapedName, nameFault, pathFault, refusedCharacter } from '../../src/path-names.js';

/**
 * The invisible characters that reorder or break what shows a name ("Trojan Source"): the
 * bidirectional embeddings, overrides and isolates, the direction marks, and the line and
 * paragraph separators.
 */
const INVISIBLE = [
  0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c, 0x2028,
  0x2029,
].map((code): [string, string] => [
  `U+${code.toString(16).toUpperCase().padStart(4, '0')}`,
  String.fromCodePoint(code),
]);

/**
 * Names that render as nothing: white space, default-ignorable code points (zero-width space,
 * word joiner, BOM, Mongolian vowel separator, variation selectors, tag characters, the
 * combining grapheme joiner), the blank fillers (Hangul U+3164, U+115F, U+1160, U+FFA0, the
 * empty braille cell U+2800) and marks with nothing to sit on, alone or mixed.
 */
const SHOWS_NOTHING = [
  ' ',
  '   ',
  '\u3000',
  '\u00a0',
  '\u200b',
  '\u2060\ufeff',
  '\u3164',
  '\u115f',
  '\u1160',
  '\uffa0',
  '\u180e',
  '\u2800',
  '\ufe00\ufe0f',
  '\u{e0001}\u{e0041}\u{e007f}',
  '\u034f',
  '\u00ad',
  '\u0301',
  '\u2065',
  ' \u200b \u3164\ufe0f ',
];

/** Visible names that merely hold such characters: emoji sequences, Persian ZWNJ, a ZWSP inside. */
const SHOWS_SOMETHING = [
  '👨\u200d👩\u200d👧.png',
  '❤\ufe0f',
  'a\u200bb',
  '\u200ba',
  'می\u200cخواهم.txt',
  '\u3164x',
  'é',
  '🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}',
  ' a ',
  '\u{F0000}',
];

describe('nameFault', () => {
  it.each([
    ['', 'empty'],
    ['a\0b', 'nul'],
    ['a\u0007b', 'control'],
    ['a\u007fb', 'control'],
    ['a\u0085b', 'control'],
    ['a\u009fb', 'control'],
    ['a\\b', 'backslash'],
    ['a/b', 'slash'],
    ['.', 'dot'],
    ['..', 'dot-dot'],
  ] as const)('refuses %j as %s', (name, fault) => {
    expect(nameFault(name)).toBe(fault);
  });

  it.each(INVISIBLE)(
    'refuses %s (a bidirectional control, mark or separator) as a control character',
    (label, ch) => {
      expect(nameFault(`txt${ch}exe.md`)).toBe('control');
      expect(refusedCharacter(`txt${ch}exe.md`)).toBe(label);
    },
  );

  it('accepts names with dots inside, spaces and unicode', () => {
    // Right-to-left scripts, emoji joined by U+200D and a zero-width space are names, not tricks.
    for (const name of [
      'a.b',
      '..a',
      'a..',
      '.env',
      'a b',
      'ü.md',
      '日本.txt',
      'שלום.txt',
      'مرحبا.md',
      '👨\u200d👩\u200d👧.png',
      'a\u200bb',
    ])
      expect(nameFault(name)).toBeNull();
  });

  it.each(SHOWS_NOTHING)('refuses %j, which shows no character, as invisible', (name) => {
    expect(nameFault(name)).toBe('invisible');
    // Checked with the other rules off too: no caller's options let a nameless name through.
    expect(nameFault(name, { allowControl: true, allowDots: true })).toBe('invisible');
  });

  it.each(SHOWS_SOMETHING)('accepts %j, which shows a character', (name) => {
    expect(nameFault(name)).toBeNull();
  });

  it('reports a control character before a name that shows nothing', () => {
    expect(nameFault('\u200b\u202e')).toBe('control');
    expect(nameFault('\t')).toBe('control');
  });

  it('lets a name that shows nothing through only when asked', () => {
    expect(nameFault('\u200b', { allowInvisible: true })).toBeNull();
  });

  it('names the first refused character by its code point, or null', () => {
    expect(refusedCharacter('a\u0085b\u202e')).toBe('U+0085');
    expect(refusedCharacter('a\0b')).toBe('U+0000');
    expect(refusedCharacter('a\u{1F600}b')).toBeNull();
    expect(refusedCharacter('plain.txt')).toBeNull();
  });

  it('counts characters as code points and bytes as UTF-8', () => {
    expect(nameFault('😀'.repeat(3), { maxCharacters: 3 })).toBeNull();
    expect(nameFault('😀'.repeat(4), { maxCharacters: 3 })).toBe('too-many-characters');
    expect(nameFault('ü'.repeat(3), { maxBytes: 6 })).toBeNull();
    expect(nameFault('ü'.repeat(4), { maxBytes: 6 })).toBe('too-many-bytes');
  });

  it('lets control characters and dots through only when asked, never NUL', () => {
    expect(nameFault('a\u0007b', { allowControl: true })).toBeNull();
    expect(nameFault('a\u202eb', { allowControl: true })).toBeNull();
    expect(nameFault('a\0b', { allowControl: true })).toBe('nul');
    expect(nameFault('..', { allowDots: true })).toBeNull();
  });
});

describe('pathFault', () => {
  it.each([
    ['', { fault: 'empty' }],
    ['a/b\0c', { fault: 'nul' }],
    ['a\\..\\b', { fault: 'backslash' }],
    ['/etc/passwd', { fault: 'absolute' }],
    ['C:/Windows', { fault: 'absolute' }],
    ['a/b\u0001', { fault: 'control' }],
    ['../x', { fault: 'dot-dot', segment: '..' }],
    ['a/./b', { fault: 'dot', segment: '.' }],
    ['a//b', { fault: 'empty', segment: '' }],
    ['a/', { fault: 'empty', segment: '' }],
  ])('refuses %j', (path, fault) => {
    expect(pathFault(path)).toEqual(fault);
  });

  it.each(INVISIBLE)('refuses %s anywhere in a path as a control character', (_label, ch) => {
    expect(pathFault(`skill/txt${ch}exe.md`)).toEqual({ fault: 'control' });
    expect(pathFault(`skill/txt${ch}exe.md`, { allowControl: true })).toBeNull();
  });

  it.each(SHOWS_NOTHING)('refuses a segment %j that shows no character', (segment) => {
    expect(pathFault(`skill/${segment}/SKILL.md`)).toEqual({ fault: 'invisible', segment });
    expect(pathFault(`${segment}/SKILL.md`, { directory: true })).toEqual({ fault: 'invisible', segment });
    expect(pathFault(`skill/${segment}/`, { directory: true })).toEqual({ fault: 'invisible', segment });
  });

  it.each(SHOWS_SOMETHING)('accepts a segment %j that shows a character', (segment) => {
    expect(pathFault(`skill/${segment}/SKILL.md`)).toBeNull();
  });

  it('lets segments that show nothing through when asked (storage keys)', () => {
    expect(pathFault('skills/\u200b/\u3164', { allowControl: true, allowInvisible: true })).toBeNull();
    expect(pathFault('skills/\u200b', { allowControl: true })).toEqual({
      fault: 'invisible',
      segment: '\u200b',
    });
  });

  it('reports climbing out before any other segment fault', () => {
    expect(pathFault('./a//../b')).toEqual({ fault: 'dot-dot', segment: '..' });
  });

  it('takes a trailing slash as a directory only when asked', () => {
    expect(pathFault('a/b/', { directory: true })).toBeNull();
    expect(pathFault('a//', { directory: true })).toEqual({ fault: 'empty', segment: '' });
  });

  it('checks segment and whole-path byte limits', () => {
    expect(pathFault(`a/${'n'.repeat(5)}`, { maxSegmentBytes: 4 })).toEqual({
      fault: 'too-many-bytes',
      segment: 'nnnnn',
    });
    expect(pathFault('ab/cd', { maxBytes: 4 })).toEqual({ fault: 'too-many-bytes' });
    expect(pathFault('ab/cd', { maxBytes: 5, maxSegmentBytes: 2 })).toBeNull();
  });

  it('lets control characters through when asked (storage keys), never NUL', () => {
    expect(pathFault('a/b\u0001', { allowControl: true })).toBeNull();
    expect(pathFault('a/b\0', { allowControl: true })).toEqual({ fault: 'nul' });
  });

  it('accepts ordinary relative paths', () => {
    for (const path of ['a', 'a/b/c.txt', 'a/b..c/.env', 'a b/ü.md']) expect(pathFault(path)).toBeNull();
  });
});

describe('escapedName', () => {
  it('writes each refused character as a \\u{…} escape, so an error shows what the name holds', () => {
    expect(escapedName('txt\u202eexe.md')).toBe('txt\\u{202E}exe.md');
    expect(escapedName('a\nb\u0085c\u2028d\0')).toBe('a\\u{A}b\\u{85}c\\u{2028}d\\u{0}');
    for (const [, ch] of INVISIBLE) expect(escapedName(`a${ch}b`)).not.toContain(ch);
  });

  it('writes every character of a segment that shows nothing as an escape, and only of such a segment', () => {
    expect(escapedName('\u200b')).toBe('\\u{200B}');
    expect(escapedName('docs/\u3164 /SKILL.md')).toBe('docs/\\u{3164}\\u{20}/SKILL.md');
    expect(escapedName('\u2060\u202e/a\u200bb')).toBe('\\u{2060}\\u{202E}/a\u200bb');
    expect(escapedName('a//b')).toBe('a//b');
  });

  it('leaves every other character as it is', () => {
    for (const name of ['Résumé (2).pdf', '日本.txt', 'שלום.txt', 'a\\b/c', '👨\u200d👩.png'])
      expect(escapedName(name)).toBe(name);
  });
});
