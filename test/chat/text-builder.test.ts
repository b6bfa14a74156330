import { describe, expect, it } from 'vitest';
import { TextBuilder } from '../../src/text-builder.js';

describe('TextBuilder', () => {
  it('gives the pieces joined in order, across blocks, and can be read again and added to', () => {
    const builder = new TextBuilder();
    expect(builder.toString()).toBe('');
    const pieces = Array.from({ length: 200 }, (_, i) => `w${i} `);
    for (const piece of pieces.slice(0, 150)) builder.add(piece);
    builder.add('');
    expect(builder.toString()).toBe(pieces.slice(0, 150).join(''));
    expect(builder.toString()).toBe(pieces.slice(0, 150).join(''));
    for (const piece of pieces.slice(150)) builder.add(piece);
    expect(builder.toString()).toBe(pieces.join(''));
    expect(builder.length).toBe(pieces.join('').length);
  });

  it('keeps surrogate pairs split across pieces whole', () => {
    const builder = new TextBuilder();
    const emoji = '😀';
    builder.add(emoji[0]!);
    builder.add(emoji[1]!);
    expect(builder.toString()).toBe(emoji);
    expect(builder.length).toBe(2);
  });
});
