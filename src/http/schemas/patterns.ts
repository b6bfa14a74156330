import { SHOWS_NOTHING_CLASS } from '../../text.js';

/**
 * The `pattern`s of the route schemas and the setup file, each with what a refused value is told
 * (the error handler and the setup file's checks put it in place of AJV's "must match pattern",
 * which shows the regular expression).
 */
export const PATTERNS = {
  notBlank: { pattern: '\\S', message: 'must not be blank' },
  /**
   * A name shown in lists and logs: one line (no control character such as a newline, tab or ESC,
   * and no line or paragraph separator U+2028/U+2029) with at least one character that shows
   * (showsCharacter in text.ts, the rule of every name: not only spaces, invisible characters
   * such as U+200B, marks alone or blank fillers such as U+3164). Written to run in one pass (the
   * lookahead, then a class and its complement): a pattern that backtracks would be quadratic on
   * a long value before its length is checked.
   */
  oneLineName: {
    pattern: `^(?=[^\\p{Cc}\\p{Zl}\\p{Zp}]*$)[${SHOWS_NOTHING_CLASS}]*[^${SHOWS_NOTHING_CLASS}]`,
    message:
      'must show a character and be one line: no control characters (newlines, tabs) or line separators (U+2028, U+2029)',
  },
  color: { pattern: '^#[0-9A-Fa-f]{6}$', message: 'must be a color written #RRGGBB' },
  month: { pattern: '^[0-9]{4}-(0[1-9]|1[0-2])$', message: 'must be a month written YYYY-MM' },
  token: { pattern: '^[A-Za-z0-9_-]+$', message: 'must hold only letters, digits, "_" and "-"' },
  envName: {
    pattern: '^[A-Za-z_][A-Za-z0-9_]*$',
    message: 'must be an environment variable name: letters, digits and "_", not starting with a digit',
  },
  functionName: {
    pattern: '^[A-Za-z0-9_-]{1,64}$',
    message: 'must be 1–64 characters of letters, digits, "_" and "-"',
  },
} as const;

const compiled = new Map<string, RegExp>();

/**
 * Whether `value` matches a pattern of PATTERNS as the schemas test it: AJV compiles a `pattern`
 * with the `u` flag, without which `\p{…}` is no Unicode property.
 */
export function matchesPattern(name: keyof typeof PATTERNS, value: string): boolean {
  const { pattern } = PATTERNS[name];
  let regExp = compiled.get(pattern);
  if (!regExp) compiled.set(pattern, (regExp = new RegExp(pattern, 'u')));
  return regExp.test(value);
}

const MESSAGES = new Map<string, string>(Object.values(PATTERNS).map((p) => [p.pattern, p.message]));

/** What a value refused by `pattern` must be, or undefined for a pattern not listed here. */
export function patternMessage(pattern: unknown): string | undefined {
  return typeof pattern === 'string' ? MESSAGES.get(pattern) : undefined;
}
