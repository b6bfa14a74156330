import { isMap, isScalar, isSeq, LineCounter, type Node, parseDocument, visit, YAMLParseError } from 'yaml';

/** The setup file's YAML as a value, or what is wrong with it (each message names the file). */
export type YamlReading = { ok: true; value: unknown } | { ok: false; messages: string[] };

const CORE_TAG_PREFIX = 'tag:yaml.org,2002:';

/**
 * The tags of YAML's core schema, each with what its value must be. The library resolves more
 * (`!!binary` to a Buffer, `!!timestamp` to a Date, `!!set`, `!!omap`), values no field of the
 * file takes and no check reports well; and a value its tag does not fit (`!!int abc`) it keeps as
 * its text, with a warning nobody sees.
 */
const CORE_TAGS = new Map<string, { is: string; fits: (node: Node) => boolean }>([
  ['str', { is: 'a string', fits: (node) => isScalar(node) && typeof node.value === 'string' }],
  ['int', { is: 'an integer', fits: (node) => isScalar(node) && typeof node.value === 'number' }],
  ['float', { is: 'a number', fits: (node) => isScalar(node) && typeof node.value === 'number' }],
  ['bool', { is: 'true or false', fits: (node) => isScalar(node) && typeof node.value === 'boolean' }],
  ['null', { is: 'null', fits: (node) => isScalar(node) && node.value === null }],
  ['map', { is: 'a mapping', fits: isMap }],
  ['seq', { is: 'a list', fits: isSeq }],
]);
const CORE_TAG_NAMES = [...CORE_TAGS.keys()].map((name) => `!!${name}`).join(', ');

/**
 * The parser's message without the file's text, which may hold a plaintext key: not
 * `prettyErrors` (it adds the lines around the error), and cut where a message goes on with the
 * text it stopped at (a block scalar header, an escape sequence, an alias).
 */
function yamlMessage(error: Error): string {
  return error.message.replace(/(: |(?<=escape sequence) ).*$/s, '');
}

/**
 * Reads a setup file's YAML. Merge keys (`<<: *defaults`, YAML 1.1, as docker-compose files
 * use them) are merged, the mapping's own fields winning. A tag outside the core schema, or a
 * value its core tag does not fit, is a problem named by line and column; the value itself is
 * never quoted (it may be a key).
 */
export function readSetupYaml(text: string, fileName: string): YamlReading {
  const lineCounter = new LineCounter();
  // Warnings off: yaml prints them itself (to stderr), quoting the text they are about.
  const document = parseDocument(text, { prettyErrors: false, lineCounter, merge: true, logLevel: 'error' });
  const at = (offset: number) => {
    const { line, col } = lineCounter.linePos(offset);
    return `line ${line}, column ${col}`;
  };
  const [error] = document.errors;
  if (error) {
    return {
      ok: false,
      messages: [`${fileName} is not valid YAML: ${yamlMessage(error)} at ${at(error.pos[0])}`],
    };
  }
  const messages: string[] = [];
  visit(document, {
    Node(_key, node) {
      if (!node.tag) return;
      const core = node.tag.startsWith(CORE_TAG_PREFIX)
        ? CORE_TAGS.get(node.tag.slice(CORE_TAG_PREFIX.length))
        : undefined;
      const shown = node.tag.startsWith(CORE_TAG_PREFIX)
        ? `!!${node.tag.slice(CORE_TAG_PREFIX.length)}`
        : node.tag;
      // The value's position: the library keeps none of its tag's.
      const where = node.range ? `on the value at ${at(node.range[0])}` : 'on a value';
      if (!core) {
        messages.push(
          `${fileName} has the tag ${shown} ${where}, which a setup file does not take: write the value without a tag, or with one of ${CORE_TAG_NAMES}`,
        );
      } else if (!core.fits(node)) {
        messages.push(`${fileName} has the tag ${shown} ${where}, which is not ${core.is}`);
      }
    },
  });
  if (messages.length > 0) return { ok: false, messages };
  try {
    // Aliases past the library's limit (a "billion laughs" file) and a merge of something that is
    // no mapping throw here, without a position.
    return { ok: true, value: document.toJS() };
  } catch (error) {
    const offset = error instanceof YAMLParseError ? error.pos[0] : undefined;
    return {
      ok: false,
      messages: [
        `${fileName} is not valid YAML: ${yamlMessage(error as Error)}${offset === undefined ? '' : ` at ${at(offset)}`}`,
      ],
    };
  }
}
