import { describe, expect, it } from 'vitest';
import { firstUnexpectedCharacter, lineAndColumn, whatIsWrongWithJson } from '../../src/http/json-syntax.js';

/** Where JSON.parse says `text` stops being JSON, when it says (not for "Unexpected token"). */
function parsePosition(text: string): number | undefined {
  try {
    JSON.parse(text);
  } catch (error) {
    const position = / at position (\d+)/.exec((error as Error).message);
    return position ? Number(position[1]) : undefined;
  }
  throw new Error(`${text} is JSON`);
}

describe('where a JSON text stops being JSON', () => {
  it('finds the character JSON.parse stops at, where JSON.parse only quotes the text around it', () => {
    for (const [text, offset] of [
      ['{"name": "x", "y": tru, "z": 1}', 22],
      ['[1, 2, ]', 7],
      ['{"a": [1, {"b": [], "c": {}}, ]}', 30],
      ['nope', 1],
      ['NaN', 0],
      ["{'a': 1}", 1],
      ['{"a": .5}', 6],
      ['{"a": +1}', 6],
      ['{"a": nul}', 9],
      ['\n\n  {"a": secret}', 10],
      ['[[[[[[]]]]]]]', 12],
      ['{"a": "\\u00e9\\n", "b": -1.5e+3, "c": [true, false, null], "d": x}', 63],
    ] as const) {
      expect(firstUnexpectedCharacter(text), text).toBe(offset);
    }
  });

  it('agrees with JSON.parse where it gives the position', () => {
    for (const text of [
      '{"a":1,}',
      '{"a" 1}',
      '{,}',
      '{"a":1 "b":2}',
      '[1 2]',
      '{"a": 01}',
      '{"a": -}',
      '{"a": 1.}',
      '{"a": 1e}',
      '{"a": 1e+}',
      '{"a": "b\\qc"}',
      '{"a": "\\u12g4"}',
      '{"a": "b\u0001c"}',
      '{"a": 1} x',
      '"a" "b"',
      '{"a": [1, 2}',
    ]) {
      expect(firstUnexpectedCharacter(text), text).toBe(parsePosition(text));
    }
  });

  it('finds none in JSON, or in a beginning of JSON that ends too early', () => {
    for (const text of [
      '{"a": [1, "b", {"c": null}]}',
      ' 1 ',
      '"x"',
      '',
      '{"a": "b',
      '[1, ',
      '{"a"',
      'tru',
      '-',
      '"\\u12',
    ]) {
      expect(firstUnexpectedCharacter(text), text).toBe(-1);
    }
  });

  it('reads deep nesting without recursion', () => {
    const depth = 200_000;
    expect(firstUnexpectedCharacter(`${'['.repeat(depth)}x`)).toBe(depth);
  });
});

describe('what is wrong with a JSON text', () => {
  it('says a reason of its own and where, never the text that JSON.parse quotes', () => {
    const text =
      '{"name": "Plans", "instructions": "my secret is sk-live-0123456789abcdef", "x": tru, "y": "zzzzzzzzzzzzzzzzzzzzzzzzzz"}';
    expect(whatIsWrongWithJson(text)).toBe('Unexpected character at line 1, column 84');
    expect(whatIsWrongWithJson('{"a": "secret')).toBe('Unterminated string at line 1, column 14');
    expect(whatIsWrongWithJson('{"a":')).toBe('Unexpected end of JSON input');
  });

  it('names a byte-order mark where JSON cannot have one, which would show as nothing', () => {
    expect(whatIsWrongWithJson('\uFEFF{"a": 1}')).toBe(
      'Unexpected byte-order mark (U+FEFF) at line 1, column 1',
    );
    expect(whatIsWrongWithJson('[1,\n \uFEFF2]')).toBe(
      'Unexpected byte-order mark (U+FEFF) at line 2, column 2',
    );
    // Inside a string it is a character like any other.
    expect(whatIsWrongWithJson('{"a": "\uFEFF", }')).toBe(
      'Expected double-quoted property name at line 1, column 12',
    );
  });

  it('counts lines of a long body without copying them', () => {
    const text = `${'\n'.repeat(1_000_000)}  x`;
    expect(lineAndColumn(text, text.length - 1)).toBe('line 1000001, column 3');
    expect(whatIsWrongWithJson(text)).toBe('Unexpected character at line 1000001, column 3');
    expect(lineAndColumn('ab\ncd', 0)).toBe('line 1, column 1');
    expect(lineAndColumn('ab\ncd', 2)).toBe('line 1, column 3');
    expect(lineAndColumn('ab\ncd', 3)).toBe('line 2, column 1');
  });
});
