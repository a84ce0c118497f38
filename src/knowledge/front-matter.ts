import { parseDocument } from 'yaml';

/**
 * YAML front matter: a block between two `---` lines at the very top of a Markdown file, as
 * SKILL.md files carry it (the Agent Skills convention). The YAML is parsed as data only: no tag
 * builds anything but plain values, aliases are bounded, and keys must be unique.
 */

/** A file split into its front matter (a YAML mapping) and the Markdown after it, or why it cannot be. */
export type FrontMatter = { data: Record<string, unknown>; body: string } | { error: string };

// the opening line, the YAML (possibly empty), the closing line; `\r\n` files too
const BLOCK = /^---[ \t]*\r?\n(?:([\s\S]*?)\r?\n)?---[ \t]*(?:\r?\n|$)/;
// an alias repeated this often is a "billion laughs" file, not a skill
const MAX_ALIAS_COUNT = 50;

/** Splits `text` into its front matter and body; an error names what is missing or malformed. */
export function parseFrontMatter(text: string): FrontMatter {
  const source = text.startsWith('\uFEFF') ? text.slice(1) : text;
  if (!/^---[ \t]*\r?\n/.test(source)) return { error: 'no front matter: the file must begin with a line `---`' };
  const match = BLOCK.exec(source);
  if (!match) return { error: 'the front matter is not closed: no line `---` after it' };
  const doc = parseDocument(match[1] ?? '', { uniqueKeys: true, strict: true });
  const problem = doc.errors[0] ?? doc.warnings[0];
  if (problem) return { error: `the front matter is not valid YAML: ${firstLine(problem.message)}` };
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (err) {
    return { error: `the front matter is not valid YAML: ${firstLine(err instanceof Error ? err.message : String(err))}` };
  }
  if (data === null || data === undefined) return { error: 'the front matter is empty' };
  if (typeof data !== 'object' || Array.isArray(data) || data instanceof Map || data instanceof Set) {
    return { error: 'the front matter is not a mapping of keys to values' };
  }
  return { data: data as Record<string, unknown>, body: source.slice(match[0].length) };
}

function firstLine(message: string): string {
  return (message.split('\n')[0] ?? '').replace(/:$/, '').trim();
}
