/**
 * The system prompt: agent instructions first, then the project's instructions, memory and
 * files, each in its own tagged section so that the model (and the echo model) can tell them
 * apart. Sections without content are left out.
 */

export interface FileInContext {
  path: string;
  mediaType: string;
  sizeBytes: number;
  /** The text given to the model; undefined when the file is listed by name only. */
  text?: string;
  /** Why the text is missing or cut (e.g. "not a text file", "over the context budget"). */
  note?: string;
}

export interface ContextSections {
  agentInstructions: string;
  project?: { instructions: string; memory: string; files: FileInContext[] };
}

export const SECTION_TAGS = {
  projectInstructions: 'project_instructions',
  projectMemory: 'project_memory',
  projectFiles: 'project_files',
} as const;

function attribute(value: string): string {
  return value.replaceAll('&', '&amp;').replaceAll('"', '&quot;').replaceAll('<', '&lt;');
}

function fileEntry(file: FileInContext): string {
  const attrs = `path="${attribute(file.path)}" type="${attribute(file.mediaType)}" size="${file.sizeBytes}"`;
  const note = file.note ? ` note="${attribute(file.note)}"` : '';
  if (file.text === undefined) return `<file ${attrs}${note} />`;
  return `<file ${attrs}${note}>\n${file.text}\n</file>`;
}

export function buildSystemPrompt(sections: ContextSections): string | undefined {
  const blocks: string[] = [];
  if (sections.agentInstructions.trim()) blocks.push(sections.agentInstructions.trim());
  const project = sections.project;
  if (project) {
    if (project.instructions.trim()) {
      blocks.push(
        `<${SECTION_TAGS.projectInstructions}>\n${project.instructions.trim()}\n</${SECTION_TAGS.projectInstructions}>`,
      );
    }
    if (project.memory.trim()) {
      blocks.push(
        `<${SECTION_TAGS.projectMemory}>\n${project.memory.trim()}\n</${SECTION_TAGS.projectMemory}>`,
      );
    }
    if (project.files.length > 0) {
      blocks.push(
        `<${SECTION_TAGS.projectFiles}>\n${project.files.map(fileEntry).join('\n')}\n</${SECTION_TAGS.projectFiles}>`,
      );
    }
  }
  return blocks.length > 0 ? blocks.join('\n\n') : undefined;
}

export interface ParsedSystemPrompt {
  agentInstructions: string;
  projectInstructions?: string;
  projectMemory?: string;
  fileNames: string[];
}

function section(text: string, tag: string): string | undefined {
  const match = new RegExp(`<${tag}>\\n([\\s\\S]*?)\\n</${tag}>`).exec(text);
  return match?.[1];
}

/** The inverse of buildSystemPrompt, as far as the echo model needs it. */
export function parseSystemPrompt(text: string): ParsedSystemPrompt {
  const firstTag = text.search(/<project_(instructions|memory|files)>/);
  const agentInstructions = (firstTag === -1 ? text : text.slice(0, firstTag)).trim();
  const files = section(text, SECTION_TAGS.projectFiles) ?? '';
  const fileNames = [...files.matchAll(/^<file path="([^"]*)"/gm)].map((m) =>
    (m[1] ?? '').replaceAll('&lt;', '<').replaceAll('&quot;', '"').replaceAll('&amp;', '&'),
  );
  return {
    agentInstructions,
    projectInstructions: section(text, SECTION_TAGS.projectInstructions),
    projectMemory: section(text, SECTION_TAGS.projectMemory),
    fileNames,
  };
}
