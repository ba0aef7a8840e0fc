// YAML for config views and editing.

import { parse, parseDocument, stringify } from "yaml";

export function toYaml(value: unknown): string {
  return stringify(value, { lineWidth: 0 });
}

export function fromYaml(text: string): unknown {
  return parse(text);
}

/** Set top-level keys of a YAML document, keeping the user's comments and layout. */
export function withTopLevel(text: string, values: Record<string, unknown>): string {
  const doc = parseDocument(text);
  if (doc.errors.length > 0 || (doc.contents !== null && !("items" in doc.contents))) return text;
  for (const [key, value] of Object.entries(values)) doc.set(key, value);
  return doc.toString({ lineWidth: 0 });
}
