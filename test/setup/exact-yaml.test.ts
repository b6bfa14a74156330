/**
 * The YAML `atrium export` writes reads back as exactly what it was written from: texts as
 * values and as keys (tool header names), at the depth of an agent in a setup file.
 */
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { exactYaml } from '../../src/setup/exact-yaml.js';

const TEXTS = [
  '',
  ' ',
  ' \n',
  '  \n\n',
  '\t\n',
  '\n',
  '\n\n',
  'end\n',
  'end\n\n',
  'a line with trailing spaces  \nnext  ',
  'windows\r\nline ends\r\n',
  '\ttab first\n',
  'yes',
  'Off',
  'null',
  '~',
  '12',
  '-0',
  '0x1F',
  '0o17',
  '.nan',
  '# comment',
  'a: b',
  'a #b',
  '- item\n- item',
  '? key',
  '%YAML 1.1',
  '--- marker',
  '...',
  'x\u2028y\u2029z\u0085w\ufeff',
  '\u00a0non-breaking\u00a0',
  'null\u0000byte and \u001b escape',
  '\n \n\u001b after a blank line with a space, and long enough to be broken into lines',
  `${'long line '.repeat(30)}\n${' indented'.repeat(20)}\n`,
];

describe('exactYaml', () => {
  it('writes texts that read back exactly, as values and as keys', () => {
    const value = {
      organizations: [
        {
          workspaces: [
            {
              agents: TEXTS.map((text, i) => ({
                title: `Agent ${i}`,
                instructions: text,
                tools: [{ type: 'mcp', name: 't', url: 'https://mcp.test/', headers: { [`${text}`]: text } }],
              })),
            },
          ],
        },
      ],
    };
    // As apply reads a setup file (src/setup/validate.ts).
    expect(parse(exactYaml(value), { logLevel: 'error' })).toEqual(value);
  });

  it('keeps a multi-line text a literal block, line for line', () => {
    const text = exactYaml({ instructions: `${'a long line of instructions '.repeat(6)}\nsecond line\n` });
    expect(text).toBe(`instructions: |\n  ${'a long line of instructions '.repeat(6)}\n  second line\n`);
  });
});
