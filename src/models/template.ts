export type TemplateValue = string | number | boolean;

const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g;

/**
 * Replaces `{{name}}` (spaces inside the braces allowed) with its value. Placeholders without a
 * value are left exactly as written, so a typo shows up in the prompt instead of vanishing.
 */
export function renderTemplate(text: string, values: Readonly<Record<string, TemplateValue>>): string {
  if (!text.includes('{{')) return text;
  return text.replace(PLACEHOLDER, (whole, name: string) =>
    Object.hasOwn(values, name) ? String(values[name]) : whole,
  );
}
