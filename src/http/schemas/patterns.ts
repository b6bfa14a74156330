/**
 * The `pattern`s of the route schemas and the setup file, each with what a refused value is told
 * (the error handler and the setup file's checks put it in place of AJV's "must match pattern",
 * which shows the regular expression).
 */
export const PATTERNS = {
  notBlank: { pattern: '\\S', message: 'must not be blank' },
  /**
   * A name shown in lists and logs: one line (no control character: newline, tab, ESC) with at
   * least one character that shows (not only spaces or invisible format characters such as
   * U+200B). Written to run in one pass (the lookahead, then a class and its complement): a
   * pattern that backtracks would be quadratic on a long value before its length is checked.
   */
  oneLineName: {
    pattern: '^(?=[^\\p{Cc}]*$)[\\s\\p{Cf}]*[^\\s\\p{Cf}]',
    message: 'must show a character and hold no control characters (newlines, tabs)',
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

const MESSAGES = new Map<string, string>(Object.values(PATTERNS).map((p) => [p.pattern, p.message]));

/** What a value refused by `pattern` must be, or undefined for a pattern not listed here. */
export function patternMessage(pattern: unknown): string | undefined {
  return typeof pattern === 'string' ? MESSAGES.get(pattern) : undefined;
}
