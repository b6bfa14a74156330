/**
 * What the setup file's YAML may hold beyond plain values: the core schema's tags (any other tag
 * is refused by line), merge keys (`<<`, as docker-compose files use them), and UTF-8 only.
 */
import { describe, expect, it } from 'vitest';
import { decodeSetupFile } from '../../src/setup/file-encoding.js';
import { parseSetupText } from '../../src/setup/validate.js';
import { oneWorkspaceFile, setupProblems } from './setup-files.js';

const CORE_TAGS = '!!str, !!int, !!float, !!bool, !!null, !!map, !!seq';

describe('tags in a setup file', () => {
  it('refuses a tag outside the core schema, naming it and its line, without quoting the value', () => {
    // Before: `!!binary` became a Buffer (a noisy "must be string"), `!custom` passed as its text.
    const text = `organizations:
  - id: org_a
    name: !!binary c2VjcmV0LXZhbHVl
    workspaces:
      - id: wsp_a
        name: !custom secret-value
        projects:
          - { name: !!timestamp 2001-12-14, archived: !!set { a } }
`;
    const problems = setupProblems(text);
    expect(problems).toEqual([
      {
        path: '(file)',
        message: `setup.yaml has the tag !!binary on the value at line 3, column 20, which a setup file does not take: write the value without a tag, or with one of ${CORE_TAGS}`,
      },
      {
        path: '(file)',
        message: `setup.yaml has the tag !custom on the value at line 6, column 23, which a setup file does not take: write the value without a tag, or with one of ${CORE_TAGS}`,
      },
      {
        path: '(file)',
        message: `setup.yaml has the tag !!timestamp on the value at line 8, column 33, which a setup file does not take: write the value without a tag, or with one of ${CORE_TAGS}`,
      },
      {
        path: '(file)',
        message: `setup.yaml has the tag !!set on the value at line 8, column 61, which a setup file does not take: write the value without a tag, or with one of ${CORE_TAGS}`,
      },
    ]);
    expect(JSON.stringify(problems)).not.toMatch(/secret-value|c2VjcmV0/);
    // A tag named as a property every object has is no core tag either.
    expect(setupProblems('providers: !!constructor x\n')).toEqual([
      {
        path: '(file)',
        message: `setup.yaml has the tag !!constructor on the value at line 1, column 26, which a setup file does not take: write the value without a tag, or with one of ${CORE_TAGS}`,
      },
    ]);
  });

  it('validates a tagged value by the type its tag gives it, as any other value', () => {
    // `!!int "12"` is the number 12, which a name is not; `!!str 12` the text "12", which a limit is not.
    const found = setupProblems(
      oneWorkspaceFile(`        limits: { monthlyTokens: !!str 12, rateLimitPerMinute: !!int "60" }
        projects:
          - { name: !!int "12", archived: !!bool "true" }
          - { name: !!str 12, color: !!null "" }
          - !!map { name: !!float "1.5" }`),
    );
    expect(found).toEqual([
      { path: 'organizations[0].workspaces[0].limits.monthlyTokens', message: 'must be integer or null' },
      { path: 'organizations[0].workspaces[0].projects[0].name', message: 'must be string' },
      { path: 'organizations[0].workspaces[0].projects[2].name', message: 'must be string' },
    ]);
  });

  it('refuses a value its core tag does not fit, by line', () => {
    // yaml leaves such a value as its text (with a warning nobody saw): `!!int abc` passed as "abc".
    const found = setupProblems(
      oneWorkspaceFile(`        projects:
          - { name: !!int abc }
          - !!seq { name: B }`),
    );
    expect(found).toEqual([
      {
        path: '(file)',
        message: 'setup.yaml has the tag !!int on the value at line 10, column 27, which is not an integer',
      },
      {
        path: '(file)',
        message: 'setup.yaml has the tag !!seq on the value at line 11, column 19, which is not a list',
      },
    ]);
  });
});

describe('merge keys in a setup file', () => {
  it('merges a mapping named by `<<`, the mapping’s own fields winning', () => {
    const result = parseSetupText(
      `organizations:
  - id: org_a
    name: A
    users:
      - &person { name: Ann, email: ann@a.test }
      - { <<: *person, email: bob@a.test, name: Bob }
    workspaces:
      - &workspace
        id: wsp_a
        name: A
        limits: &limits { monthlyTokens: 1000, rateLimitPerMinute: 60 }
      - <<: *workspace
        id: wsp_b
        name: B
        limits: { <<: *limits, rateLimitPerMinute: 5 }
`,
      'setup.yaml',
    );
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const [org] = result.setup.organizations ?? [];
    expect(org?.users).toEqual([
      { name: 'Ann', email: 'ann@a.test' },
      { name: 'Bob', email: 'bob@a.test' },
    ]);
    expect(org?.workspaces?.[1]).toEqual({
      id: 'wsp_b',
      name: 'B',
      limits: { monthlyTokens: 1000, rateLimitPerMinute: 5 },
    });
  });

  it('reports a merge of something that is not a mapping as a problem of the file', () => {
    expect(setupProblems('x: &s text\norganizations:\n  - { <<: *s, name: A }\n')).toEqual([
      { path: '(file)', message: 'setup.yaml is not valid YAML: Merge sources must be maps or map aliases' },
    ]);
  });
});

describe('the encoding of a setup file', () => {
  const yaml = 'organizations:\n  - { name: Acme }\n';
  const utf16le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(yaml, 'utf16le')]);
  const utf16be = Buffer.from(utf16le.subarray(2)).swap16();

  it.each([
    [
      'UTF-16 (little-endian) with its byte-order mark',
      utf16le,
      'setup.yaml is UTF-16 (it starts with a UTF-16 byte-order mark): the setup file must be UTF-8',
    ],
    [
      'UTF-16 (big-endian) with its byte-order mark',
      Buffer.concat([Buffer.from([0xfe, 0xff]), utf16be]),
      'setup.yaml is UTF-16 (it starts with a UTF-16 byte-order mark): the setup file must be UTF-8',
    ],
    [
      'UTF-32 (little-endian) with its byte-order mark',
      Buffer.from([0xff, 0xfe, 0, 0, 0x61, 0, 0, 0]),
      'setup.yaml is UTF-32 (it starts with a UTF-32 byte-order mark): the setup file must be UTF-8',
    ],
    [
      'UTF-32 (big-endian) with its byte-order mark',
      Buffer.from([0, 0, 0xfe, 0xff, 0, 0, 0, 0x61]),
      'setup.yaml is UTF-32 (it starts with a UTF-32 byte-order mark): the setup file must be UTF-8',
    ],
    [
      'UTF-16 without a byte-order mark',
      Buffer.from(yaml, 'utf16le'),
      'setup.yaml holds NUL bytes (UTF-16 or UTF-32 text?): the setup file must be UTF-8',
    ],
    [
      'Latin-1',
      Buffer.from('organizations:\n  - { name: Caf\xe9 }\n', 'latin1'),
      'setup.yaml is not UTF-8 text: the setup file must be UTF-8',
    ],
  ])('refuses a file in %s, saying it must be UTF-8', (_label, bytes, message) => {
    expect(decodeSetupFile(bytes, 'setup.yaml')).toEqual({
      ok: false,
      problems: [{ path: '(file)', message }],
    });
  });

  it('reads UTF-8, with or without its byte-order mark', () => {
    expect(decodeSetupFile(Buffer.from(yaml), 'setup.yaml')).toEqual({ ok: true, text: yaml });
    expect(decodeSetupFile(Buffer.from(`\ufeff${yaml}`), 'setup.yaml')).toEqual({ ok: true, text: yaml });
  });
});
