import { parse as parseYaml } from 'yaml';
import type { Problem } from './skill-archive.js';
import { type NameFault, nameFault, refusedCharacter } from '../path-names.js';
import { unstorableTextReason } from '../text.js';

/** What a SKILL.md (or standalone markdown part) says about its skill. */
export interface SkillHeader {
  name: string;
  description: string;
  /** The rest of the front matter (license, allowed-tools, metadata, …), kept as given. */
  metadata: Record<string, unknown>;
}

export const SKILL_NAME_MAX = 64;
export const SKILL_DESCRIPTION_MAX = 1024;
/**
 * The longest front matter read, in characters. A real one (name ≤ 64, description ≤ 1,024,
 * license, compatibility ≤ 500, allowed-tools, a small metadata map) comes to 1–3 KiB; 8 KiB
 * leaves room. The cap is what keeps hostile YAML cheap: the `yaml` parser checks each map's
 * keys for duplicates pairwise (quadratic) and fails deep nesting slowly (about 13 µs per
 * unclosed `[`, then a stack overflow near 2,000 levels). Parse times measured (yaml 2.9, CPU
 * time, best of 7 on a busy 2-core machine): a realistic 1.3 KiB front matter 0.2 ms; at 8 KiB,
 * ~2,000 keys with no value 30 ms, a flow map of ~2,700 keys 40 ms, ~1,000 `k<i>: v` lines 12 ms,
 * 4,095 nested `[…]` 19 ms, 8,192 unclosed `[` 42 ms. Uncapped, 30,000 keys (300 KB) took 5–24 s.
 */
export const SKILL_FRONT_MATTER_MAX = 8 * 1024;
/**
 * The longest metadata kept, in characters of its JSON: four times the front matter's cap, room
 * for what JSON adds to YAML without aliases (a line `k:` is `"k":null,`, three times as long). A YAML alias repeats its anchor's value without repeating
 * its text, so the front matter's cap does not bound the metadata: 99 aliases of a
 * 7,000-character string made 7.4 KB of front matter into 700 KB of metadata, stored and listed.
 */
export const SKILL_METADATA_MAX = 4 * SKILL_FRONT_MATTER_MAX;

const SKILL_NAME_FAULTS: Record<Exclude<NameFault, 'nul' | 'control'>, string> = {
  empty: 'the skill name is empty',
  backslash: 'the skill name contains a slash',
  slash: 'the skill name contains a slash',
  dot: 'the skill name is "."',
  'dot-dot': 'the skill name is ".."',
  invisible: 'the skill name has no visible character',
  'too-many-characters': `the skill name is longer than ${SKILL_NAME_MAX} characters`,
  'too-many-bytes': `the skill name is longer than ${SKILL_NAME_MAX} characters`,
};

/**
 * Why a skill name cannot be used, or null. Names are compared exactly (case-sensitive). A
 * skill is stored under its id, never its name, so `.` and `..` are names like any other.
 */
export function invalidSkillNameReason(name: string): string | null {
  const fault = nameFault(name, { maxCharacters: SKILL_NAME_MAX, allowDots: true });
  // Right-to-left overrides, isolates and marks make a name read as another one in a list: the
  // character is named by code point, since shown it would be as invisible in the answer.
  if (fault === 'nul' || fault === 'control') {
    return `the skill name contains ${refusedCharacter(name)}, a control, bidirectional or line separator character`;
  }
  if (fault) return SKILL_NAME_FAULTS[fault];
  const unstorable = unstorableTextReason(name);
  return unstorable ? `the skill name ${unstorable}` : null;
}

const OPENING = /^---[ \t]*\r?\n/;
const CLOSING = /^(?:---|\.\.\.)[ \t]*$/m;

/** Splits `---\n<yaml>\n---\n<body>`; no front matter at all gives null. */
export function splitFrontMatter(text: string): { yaml: string; body: string } | null | 'unterminated' {
  const source = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const opening = OPENING.exec(source);
  if (!opening) return null;
  const rest = source.slice(opening[0].length);
  const closing = CLOSING.exec(rest);
  if (!closing) return 'unterminated';
  const afterClosing = rest.slice(closing.index + closing[0].length).replace(/^\r?\n/, '');
  return { yaml: rest.slice(0, closing.index), body: afterClosing };
}

/**
 * Reads the YAML front matter of a skill file (the Agent Skills format: `name`, `description`,
 * optional `license`, `allowed-tools`, `metadata`). A file without front matter is a skill
 * named after its file or directory with an empty description.
 */
export function parseSkillMarkdown(text: string, fallbackName: string): SkillHeader | Problem {
  const split = splitFrontMatter(text);
  if (split === 'unterminated') {
    return { code: 'invalid_front_matter', message: 'the front matter has no closing `---` line' };
  }
  let fields: Record<string, unknown> = {};
  // Characters (code points), as every other bound of the API: counted only past the cap in
  // UTF-16 units, which no more characters can be.
  const characters = split && split.yaml.length > SKILL_FRONT_MATTER_MAX ? [...split.yaml].length : 0;
  if (characters > SKILL_FRONT_MATTER_MAX) {
    return {
      code: 'invalid_front_matter',
      message: `the front matter is longer than ${SKILL_FRONT_MATTER_MAX} characters (${characters})`,
    };
  }
  if (split) {
    let parsed: unknown;
    try {
      // `yaml` never runs code and allows 100 aliases of one anchor (maxAliasCount), so what
      // comes out is at most about 100 times the front matter: SKILL_METADATA_MAX bounds what
      // is kept; the size cap above bounds the parse (SKILL_FRONT_MATTER_MAX).
      parsed = parseYaml(split.yaml, { prettyErrors: false });
    } catch (error) {
      const first = String((error as Error).message).split('\n')[0];
      return { code: 'invalid_front_matter', message: `the front matter is not valid YAML (${first})` };
    }
    if (parsed !== null && parsed !== undefined) {
      if (typeof parsed !== 'object' || Array.isArray(parsed)) {
        return { code: 'invalid_front_matter', message: 'the front matter is not a YAML mapping' };
      }
      fields = parsed as Record<string, unknown>;
    }
  }

  const { name: rawName, description: rawDescription, ...metadata } = fields;
  if (rawName !== undefined && rawName !== null && typeof rawName !== 'string') {
    return { code: 'invalid_front_matter', message: '`name` in the front matter must be a string' };
  }
  if (rawDescription !== undefined && rawDescription !== null && typeof rawDescription !== 'string') {
    return { code: 'invalid_front_matter', message: '`description` in the front matter must be a string' };
  }
  // One spelling per name: a macOS zip's folder names are decomposed (NFD), typed ones composed.
  const name = (typeof rawName === 'string' && rawName.trim() !== '' ? rawName : fallbackName)
    .trim()
    .normalize('NFC');
  const nameProblem = invalidSkillNameReason(name);
  if (nameProblem) return { code: 'invalid_name', message: nameProblem };
  const description = typeof rawDescription === 'string' ? rawDescription.trim() : '';
  const descriptionProblem = unstorableTextReason(description);
  if (descriptionProblem) {
    return { code: 'invalid_front_matter', message: `\`description\` ${descriptionProblem}` };
  }
  if ([...description].length > SKILL_DESCRIPTION_MAX) {
    return {
      code: 'invalid_front_matter',
      message: `\`description\` is longer than ${SKILL_DESCRIPTION_MAX} characters`,
    };
  }
  // Dates and other YAML-only values become their JSON form; the metadata is stored as JSON.
  let json: string;
  try {
    json = JSON.stringify(metadata);
  } catch {
    // An alias inside its own anchor (`a: &x {b: *x}`) makes a cycle, which JSON cannot hold.
    return {
      code: 'invalid_front_matter',
      message: 'the front matter refers to itself (a YAML alias inside its own anchor)',
    };
  }
  // Characters, as the front matter's cap; past twice the cap in UTF-16 units, it is over anyway.
  if (
    json.length > SKILL_METADATA_MAX &&
    (json.length > 2 * SKILL_METADATA_MAX || [...json].length > SKILL_METADATA_MAX)
  ) {
    return {
      code: 'invalid_front_matter',
      message: `the front matter's metadata is longer than ${SKILL_METADATA_MAX} characters as JSON (each YAML alias repeats its anchor's value)`,
    };
  }
  return { name, description, metadata: JSON.parse(json) as Record<string, unknown> };
}

export function isProblem(value: SkillHeader | Problem): value is Problem {
  return 'code' in value;
}
