import type { EventData } from '../protocol/events.js';

/** `text` on one line (runs of white space as one space), cut to `max` characters with `…`. */
export function clip(text: string, max = 80): string {
  const one = text.replace(/\s+/g, ' ').trim();
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}

/** One line of output as it was (its indentation kept), cut to `max` characters with `…`. */
export function clipLine(line: string, max = 100): string {
  const one = line.replace(/\s+$/, '');
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}

/** `1 byte`, `912 bytes`, `14.2 KiB`, `3.1 MiB`: a size a person reads at a glance. */
export function byteSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} byte${bytes === 1 ? '' : 's'}`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

type Args = Record<string, unknown>;

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** The files a unified diff touches, from its `+++` headers (`---` for a deletion). */
function patchFiles(patch: string): string[] {
  const files: string[] = [];
  let from: string | null = null;
  for (const line of patch.split('\n')) {
    const m = /^(---|\+\+\+) (?:[ab]\/)?(\S+)/.exec(line);
    if (!m) continue;
    if (m[1] === '---') from = m[2]!;
    else {
      const to = m[2]!;
      files.push(to === '/dev/null' ? `${from ?? '?'} (deleted)` : to);
      from = null;
    }
  }
  return [...new Set(files)];
}

/** What each built-in tool's arguments come to in a few words; null: not one of them (or not its shape). */
const SUMMARIES: Record<string, (a: Args) => string | null> = {
  read_file: (a) => {
    const path = str(a.path);
    if (path === null) return null;
    const offset = num(a.offset);
    const limit = num(a.limit);
    if (offset === null && limit === null) return path;
    const start = offset ?? 1;
    return `${path} lines ${start}–${limit === null ? 'end' : start + limit - 1}`;
  },
  write_file: (a) => {
    const path = str(a.path);
    const content = str(a.content);
    if (path === null || content === null) return null;
    return `${path} (${byteSize(utf8Bytes(content))})`;
  },
  shell: (a) => {
    const command = str(a.command);
    if (command === null) return null;
    const cwd = str(a.cwd);
    return `${clip(command, 100)}${cwd && cwd !== '.' ? ` (in ${cwd})` : ''}`;
  },
  search: (a) => {
    const pattern = str(a.pattern);
    if (pattern === null) return null;
    const path = str(a.path);
    return `${clip(pattern, 60)}${path && path !== '.' ? ` in ${path}` : ''}`;
  },
  list_dir: (a) => str(a.path) ?? '.',
  apply_patch: (a) => {
    const patch = str(a.patch);
    if (patch === null) return null;
    const files = patchFiles(patch);
    return files.length === 0 ? 'a patch naming no file' : clip(files.join(', '), 100);
  },
  ask_user: (a) => {
    const question = str(a.question);
    return question === null ? null : clip(question, 100);
  },
  update_plan: (a) => {
    if (!Array.isArray(a.items)) return null;
    const items = a.items as Array<{ status?: unknown; content?: unknown }>;
    const done = items.filter((i) => i?.status === 'completed').length;
    const now = items.find((i) => i?.status === 'in_progress');
    return `${items.length} item${items.length === 1 ? '' : 's'}, ${done} done${typeof now?.content === 'string' ? ` · now: ${clip(now.content, 60)}` : ''}`;
  },
  update_goal: (a) => {
    const phase = str(a.phase);
    if (phase === null) return null;
    const reason = str(a.reason);
    return `${phase}${reason ? ` (${clip(reason, 80)})` : ''} at revision ${num(a.expected_revision) ?? '?'}`;
  },
  artifact_read: (a) => {
    const id = str(a.id);
    if (id === null) return null;
    const offset = num(a.offset);
    return `${id}${offset === null ? '' : ` from line ${offset}`}`;
  },
};

/**
 * A tool call in one line for a person: `read_file src/slug.js`, `shell npm test`. Built-in tools
 * say what they act on; any other tool (or arguments that are not JSON of the tool's shape, or a
 * preview of arguments too big for the log) shows its arguments clipped.
 */
export function callSummary(name: string, args: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(args);
  } catch {
    parsed = undefined;
  }
  const summary = SUMMARIES[name];
  const said = summary && parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? summary(parsed as Args) : null;
  if (said !== null) return `${name} ${said}`;
  const raw = clip(args, 80);
  return raw === '' || raw === '{}' ? name : `${name} ${raw}`;
}

/** A tool result in brief: its head (`ok · 312 bytes · 12 lines`, `error · …`) and up to `lines` first lines. */
export interface ResultBrief {
  head: string;
  lines: string[];
  /** Lines of the output not in `lines`. */
  more: number;
}

/**
 * What a person sees of a result: ok or the error, its size (the whole output's, when it was
 * spilled to an artifact, with the artifact's ID), and its first lines, each clipped.
 */
export function resultBrief(d: EventData<'tool/result'>, lines = 3): ResultBrief {
  const all = d.output.replace(/\r\n/g, '\n').split('\n');
  while (all.length > 0 && all.at(-1)!.trim() === '') all.pop();
  const bytes = d.artifact ? d.artifact.bytes : utf8Bytes(d.output);
  const parts = [d.ok ? 'ok' : `error${d.error ? ` ${d.error.code}` : ''}`, byteSize(bytes)];
  // a spilled output's lines here are its preview's, not its own: its size says enough
  if (all.length > 1 && !d.artifact) parts.push(`${all.length} lines`);
  if (d.artifact) parts.push(`artifact ${d.artifact.id}`);
  if (d.redactions) parts.push(`${d.redactions} redacted`);
  const shown = all.slice(0, lines).map((l) => clipLine(l));
  return { head: parts.join(' · '), lines: shown, more: Math.max(0, all.length - shown.length) };
}

// the page bundles this file: the browser has no Buffer, both have TextEncoder
const encoder = new TextEncoder();

/** The bytes of `text` in UTF-8. */
function utf8Bytes(text: string): number {
  return encoder.encode(text).length;
}
