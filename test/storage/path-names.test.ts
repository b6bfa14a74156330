import { describe, expect, it } from 'vitest';
import { nameFault, pathFault } from '../../src/path-names.js';

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

  it('accepts names with dots inside, spaces and unicode', () => {
    for (const name of ['a.b', '..a', 'a..', '.env', 'a b', 'ü.md', '日本.txt'])
      expect(nameFault(name)).toBeNull();
  });

  it('counts characters as code points and bytes as UTF-8', () => {
    expect(nameFault('😀'.repeat(3), { maxCharacters: 3 })).toBeNull();
    expect(nameFault('😀'.repeat(4), { maxCharacters: 3 })).toBe('too-many-characters');
    expect(nameFault('ü'.repeat(3), { maxBytes: 6 })).toBeNull();
    expect(nameFault('ü'.repeat(4), { maxBytes: 6 })).toBe('too-many-bytes');
  });

  it('lets control characters and dots through only when asked, never NUL', () => {
    expect(nameFault('a\u0007b', { allowControl: true })).toBeNull();
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
