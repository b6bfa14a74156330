/**
 * JSON.parse's reasons that quote nothing of the text, each followed in its message by its
 * position (` in JSON at position N`, or ` at position N`: V8's messages of Node 20 and later).
 * Only these words are answered: its other messages quote the text around the error
 * (`Unexpected token ',', ..."<20 characters of the body>"... is not valid JSON`), which is the
 * client's data (a key, a chat message) and would be answered and logged.
 */
const POSITIONED_REASONS = new Set([
  'Unexpected number',
  'Unexpected string',
  'Unterminated string',
  "Expected property name or '}'",
  "Expected ',' or ']' after array element",
  "Expected ',' or '}' after property value",
  'Expected double-quoted property name',
  'Exponent part is missing a number',
  "Expected ':' after property name",
  'Unterminated fractional number',
  'Unexpected non-whitespace character after JSON',
  'Bad escaped character',
  'Bad control character in string literal',
  'Bad Unicode escape',
  'No number after minus sign',
]);
const END_OF_INPUT = 'Unexpected end of JSON input';
const POSITIONED = /^(.*?)(?: in JSON)? at position (\d+)/s;

/**
 * What is wrong with `text`, which JSON.parse refuses, and where as a line and column (1-based):
 * one of JSON.parse's reasons that quote nothing, with the position it gives; otherwise
 * (its message quotes the text instead) "Unexpected character" where firstUnexpectedCharacter
 * finds it, or "Unexpected byte-order mark (U+FEFF)" when that invisible one is it. Never any of
 * the text itself.
 */
export function whatIsWrongWithJson(text: string): string {
  let message: string;
  try {
    JSON.parse(text);
    return 'not valid JSON';
  } catch (error) {
    message = (error as Error).message;
  }
  if (message === END_OF_INPUT) return END_OF_INPUT;
  const positioned = POSITIONED.exec(message);
  if (positioned && POSITIONED_REASONS.has(positioned[1]!)) {
    return `${positioned[1]} at ${lineAndColumn(text, Number(positioned[2]))}`;
  }
  const offset = firstUnexpectedCharacter(text);
  if (offset === -1) return 'not valid JSON';
  const what =
    text.charCodeAt(offset) === 0xfeff ? 'Unexpected byte-order mark (U+FEFF)' : 'Unexpected character';
  return `${what} at ${lineAndColumn(text, offset)}`;
}

/**
 * `line L, column C` (1-based, columns in UTF-16 code units) of `offset` in `text`, by counting
 * newlines in place: splitting what comes before made a copy of each line (~200 MB and 300 ms for
 * a 16 MiB body of newlines).
 */
export function lineAndColumn(text: string, offset: number): string {
  let line = 1;
  let lineStart = 0;
  for (let newline = text.indexOf('\n'); newline !== -1 && newline < offset;) {
    line++;
    lineStart = newline + 1;
    newline = text.indexOf('\n', lineStart);
  }
  return `line ${line}, column ${offset - lineStart + 1}`;
}

/**
 * The offset of the first character at which `text` stops being JSON (RFC 8259, as JSON.parse
 * reads it), or -1 when there is none: `text` is JSON, or the beginning of JSON that ends too
 * early. The place JSON.parse's messages that quote the text do not give. Iterative, so that
 * deep nesting costs no stack.
 */
export function firstUnexpectedCharacter(text: string): number {
  const scan = new JsonScan(text);
  return scan.json() || scan.at >= text.length ? -1 : scan.at;
}

const HEX_DIGIT = /^[0-9a-fA-F]$/;
const ESCAPED = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't']);
const LITERALS = ['true', 'false', 'null'];

const SPACE = 0x20;
const WHITESPACE = /[ \t\n\r]*/y;
const PLAIN_STRING_CHARACTERS = /[^"\\\u0000-\u001f]*/y;

const isDigit = (char: string | undefined) => char !== undefined && char >= '0' && char <= '9';

/** Reads JSON only to find where it stops: each method false with `at` on that character. */
class JsonScan {
  at = 0;
  constructor(private readonly text: string) {}

  /** A whole JSON text, nothing after it but whitespace. */
  json(): boolean {
    // The closing brackets of the objects and arrays being read, innermost last.
    const open: string[] = [];
    for (;;) {
      const read = this.valueOrOpening(open);
      if (read === 'unexpected') return false;
      if (read === 'opening') {
        if (open.at(-1) === '}' && !this.member()) return false;
        continue;
      }
      // After a value: the next one of its container, the container's end, or the text's end.
      for (;;) {
        this.skipWhitespace();
        const close = open.at(-1);
        if (close === undefined) return this.at === this.text.length;
        const char = this.text[this.at];
        if (char === ',') {
          this.at++;
          if (close === '}' && !this.member()) return false;
          break;
        }
        if (char !== close) return false;
        open.pop();
        this.at++;
      }
    }
  }

  /**
   * A whole value, or the opening of an object or array that is not empty (its closing bracket
   * pushed on `open`, its first member or value next).
   */
  private valueOrOpening(open: string[]): 'value' | 'opening' | 'unexpected' {
    this.skipWhitespace();
    const char = this.text[this.at];
    if (char !== '{' && char !== '[') return this.scalar() ? 'value' : 'unexpected';
    this.at++;
    this.skipWhitespace();
    const close = char === '{' ? '}' : ']';
    if (this.text[this.at] === close) {
      this.at++;
      return 'value';
    }
    open.push(close);
    return 'opening';
  }

  /** A member's name and colon, before its value. */
  private member(): boolean {
    this.skipWhitespace();
    if (this.text[this.at] !== '"' || !this.string()) return false;
    this.skipWhitespace();
    if (this.text[this.at] !== ':') return false;
    this.at++;
    return true;
  }

  private scalar(): boolean {
    const char = this.text[this.at];
    if (char === '"') return this.string();
    if (char === '-' || isDigit(char)) return this.number();
    const literal = LITERALS.find((word) => word[0] === char);
    return literal !== undefined && this.literal(literal);
  }

  private string(): boolean {
    this.at++;
    for (;;) {
      this.skip(PLAIN_STRING_CHARACTERS);
      const char = this.text[this.at];
      if (char === undefined || char < ' ') return false;
      if (char === '"') {
        this.at++;
        return true;
      }
      if (char === '\\' && !this.escape()) return false;
      if (char !== '\\') this.at++;
    }
  }

  private escape(): boolean {
    this.at++;
    const char = this.text[this.at];
    if (char === 'u') {
      for (let digit = 0; digit < 4; digit++) {
        this.at++;
        if (!HEX_DIGIT.test(this.text[this.at] ?? '')) return false;
      }
    } else if (char === undefined || !ESCAPED.has(char)) return false;
    this.at++;
    return true;
  }

  private number(): boolean {
    if (this.text[this.at] === '-') this.at++;
    if (this.text[this.at] === '0') this.at++;
    else if (!this.digits()) return false;
    if (this.text[this.at] === '.') {
      this.at++;
      if (!this.digits()) return false;
    }
    if (this.text[this.at] === 'e' || this.text[this.at] === 'E') {
      this.at++;
      if (this.text[this.at] === '+' || this.text[this.at] === '-') this.at++;
      if (!this.digits()) return false;
    }
    return true;
  }

  private digits(): boolean {
    const start = this.at;
    while (isDigit(this.text[this.at])) this.at++;
    return this.at > start;
  }

  private literal(word: string): boolean {
    for (const char of word) {
      if (this.text[this.at] !== char) return false;
      this.at++;
    }
    return true;
  }

  private skipWhitespace(): void {
    // Most values have no whitespace before them, or one space: no regular expression for those.
    if (this.text.charCodeAt(this.at) > SPACE) return;
    this.skip(WHITESPACE);
  }

  /**
   * Past a run of the characters `run` (sticky) matches: a regular expression reads a long run,
   * as a string of a chat message, many times faster than a loop over its characters.
   */
  private skip(run: RegExp): void {
    run.lastIndex = this.at;
    run.test(this.text);
    this.at = run.lastIndex;
  }
}
