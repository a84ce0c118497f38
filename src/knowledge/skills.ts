import type { Dirent } from 'node:fs';
import { readdir, realpath, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ToolError } from '../protocol/errors.js';
import { parseFrontMatter } from './front-matter.js';
import { isInside, readTextFile, realOrSelf, sha256Digest } from './text-file.js';

/**
 * Skills (issue 30 §3), by progressive disclosure: a skill is a directory holding a SKILL.md (YAML
 * front matter with `name` and `description`, then Markdown instructions) and any files it needs.
 * Every request carries only the names and descriptions; the model loads a body with the tool
 * `load_skill` when a task calls for it, and reads the skill's other files with the normal tools.
 * The host only reads these files: a skill's scripts run, if at all, as the agent's own tool calls.
 */

/** A skill found on disk: what the index shows of it and where it lives. */
export interface SkillInfo {
  /** The front matter `name`, the same as the directory's name. */
  name: string;
  /** The front matter `description`: what the skill is for and when to use it. */
  description: string;
  /** Absolute path of its SKILL.md. */
  path: string;
  /** Absolute path of the skill's directory. */
  dir: string;
  /** `project`: under `<workspace>/.agents/skills`; `user`: under `<userConfigDir>/skills`. */
  scope: 'project' | 'user';
  /** `sha256:<hex>` of the SKILL.md bytes when it was indexed. */
  digest: string;
}

/** A SKILL.md (or skill directory) left out, and why. */
export interface SkippedSkill {
  path: string;
  reason: string;
}

/** A loaded skill: the body, the digest of the file it came from, and the skill's other files. */
export interface LoadedSkill {
  body: string;
  /** `sha256:<hex>` of the SKILL.md bytes as read now; differs from the index's when it was edited since. */
  digest: string;
  /** The skill's other files, relative to its directory with `/`, sorted; at most `MAX_SKILL_FILES`. */
  files: string[];
  /** True when the skill has more files than were listed. */
  moreFiles: boolean;
}

/** The largest SKILL.md read; a bigger one is skipped. */
export const MAX_SKILL_BYTES = 256 * 1024;
/** The most files of one skill listed by `loadSkill`. */
export const MAX_SKILL_FILES = 200;
/** The most skill directories looked at in one skills root: past them the rest are skipped, with one reason. */
export const MAX_SKILLS_PER_ROOT = 1000;
// Agent Skills spec: lowercase letters, digits and single hyphens, not at either end
const NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const MAX_NAME_CHARS = 64;
const MAX_DESCRIPTION_CHARS = 1024;
// a listing walk stops at this depth and this many entries, whatever the skill holds
const MAX_WALK_DEPTH = 8;
const MAX_WALK_ENTRIES = 5000;

/**
 * Parses a SKILL.md: YAML front matter between `---` lines with a string `name` (lowercase letters,
 * digits and hyphens, at most 64 characters) and a non-empty string `description` (at most 1,024
 * characters), as the Agent Skills convention that Codex and Claude Code read; and the body after it.
 */
export function parseSkill(text: string): { name: string; description: string; body: string } | { error: string } {
  const fm = parseFrontMatter(text);
  if ('error' in fm) return fm;
  const { name, description } = fm.data;
  if (name === undefined) return { error: 'the front matter has no `name`' };
  if (typeof name !== 'string') return { error: '`name` is not a string' };
  if (name.length > MAX_NAME_CHARS) return { error: `\`name\` is ${name.length} characters, over ${MAX_NAME_CHARS}` };
  if (!NAME.test(name)) return { error: `\`name\` "${printable(name)}" may hold only lowercase letters, digits and single hyphens inside it` };
  if (description === undefined) return { error: 'the front matter has no `description`' };
  if (typeof description !== 'string') return { error: '`description` is not a string' };
  if (description.trim() === '') return { error: '`description` is empty' };
  if (description.length > MAX_DESCRIPTION_CHARS) return { error: `\`description\` is ${description.length} characters, over ${MAX_DESCRIPTION_CHARS}` };
  return { name, description, body: fm.body.replace(/^(?:[ \t]*\r?\n)+/, '') };
}

/**
 * The skills in `<workspace>/.agents/skills/<name>/SKILL.md` and `<userConfigDir>/skills/<name>/SKILL.md`,
 * sorted by name; a project skill wins over a user skill of the same name. A skill directory that
 * cannot be used (no SKILL.md, bad front matter, a name unlike its directory's, too big, a symlink
 * out of its skills root) is in `skipped` with the reason.
 */
export async function discoverSkills(opts: { workspace: string; userConfigDir: string | null }): Promise<{ skills: SkillInfo[]; skipped: SkippedSkill[] }> {
  const skipped: SkippedSkill[] = [];
  const byName = new Map<string, SkillInfo>();
  // user first: a project skill of the same name then replaces it
  if (opts.userConfigDir !== null) {
    for (const s of await skillsOfRoot(join(opts.userConfigDir, 'skills'), 'user', null, skipped)) byName.set(s.name, s);
  }
  const workspace = await realOrSelf(opts.workspace);
  for (const s of await skillsOfRoot(join(opts.workspace, '.agents', 'skills'), 'project', workspace, skipped)) byName.set(s.name, s);
  const skills = [...byName.values()].sort((a, b) => compare(a.name, b.name));
  return { skills, skipped };
}

/**
 * Loads a skill for the model: its body, the digest of its SKILL.md as read now (the caller
 * compares it with the indexed one), and its other files. The listing follows no symlink out of
 * the skill's directory and descends into none. Throws a `ToolError` when the file is gone or no
 * longer a valid skill.
 */
export async function loadSkill(skill: SkillInfo): Promise<LoadedSkill> {
  const realDir = await realOrSelf(skill.dir);
  const read = await readTextFile(skill.path, { maxBytes: MAX_SKILL_BYTES, overLimit: 'refuse', within: realDir });
  if (read.kind !== 'text') {
    throw new ToolError('skill.unreadable', `skill ${skill.name}: ${skill.path} ${read.kind === 'missing' ? 'is gone' : read.reason}`, {
      hint: 'restore the SKILL.md, or start a new turn so the skill index is read again',
    });
  }
  const parsed = parseSkill(read.text);
  if ('error' in parsed || parsed.name !== skill.name) {
    throw new ToolError('skill.invalid', `skill ${skill.name}: ${skill.path} is no longer a valid skill (${'error' in parsed ? parsed.error : `its name is now ${parsed.name}`})`, {
      hint: 'fix its front matter (name, description)',
    });
  }
  const { files, more } = await listFiles(realDir);
  return { body: parsed.body, digest: sha256Digest(read.bytes), files, moreFiles: more };
}

/**
 * The skill `load_skill` names, from the index the request carried; an unknown name is a
 * `ToolError` (`skill.unknown`) listing the known ones, so the model can correct itself.
 */
export function findSkill(skills: readonly SkillInfo[], name: string): SkillInfo {
  const skill = skills.find((s) => s.name === name);
  if (skill) return skill;
  const known = skills.map((s) => s.name).sort(compare);
  throw new ToolError('skill.unknown', `no skill named "${printable(name)}"`, {
    hint: known.length === 0 ? 'this workspace has no skills' : `the skills are: ${known.join(', ')}`,
  });
}

/**
 * The skill index put into every request: a sentence telling the model to call `load_skill` with
 * a name, then one line per skill, name and description (on one line). Deterministic; the empty
 * string when there are no skills.
 */
export function skillIndexText(skills: readonly SkillInfo[]): string {
  if (skills.length === 0) return '';
  const lines = [...skills].sort((a, b) => compare(a.name, b.name)).map((s) => `- ${s.name}: ${oneLine(s.description)}`);
  return [
    'Skills: instructions for particular kinds of task. When a task matches a skill\'s description, call the tool `load_skill` with its name and follow what it says before doing the task.',
    ...lines,
  ].join('\n');
}

/** The text of a loaded skill as the model sees it (the result of `load_skill`): name, directory, body, other files. */
export function loadedSkillText(skill: SkillInfo, loaded: { body: string; files: readonly string[]; moreFiles?: boolean }): string {
  const body = loaded.body.endsWith('\n') ? loaded.body : `${loaded.body}\n`;
  const files = loaded.files.length === 0
    ? 'The skill has no other files.'
    : [
      `Other files of the skill (relative to ${skill.dir}; read them with the usual tools when its instructions name them):`,
      ...loaded.files.map((f) => `- ${f}`),
      ...(loaded.moreFiles ? ['- ... (more files, not listed)'] : []),
    ].join('\n');
  return `Skill ${skill.name} (${skill.scope} skill in ${skill.dir}):\n\n${body}\n${files}`;
}

/** The skills of one root; `workspace` (a real path) is where a project root must resolve inside, null for the user's. */
async function skillsOfRoot(root: string, scope: SkillInfo['scope'], workspace: string | null, skipped: SkippedSkill[]): Promise<SkillInfo[]> {
  let realRoot: string;
  try {
    realRoot = await realpath(root);
    if (!(await stat(realRoot)).isDirectory()) return [];
  } catch {
    return [];
  }
  if (workspace !== null && !isInside(realRoot, workspace)) {
    skipped.push({ path: root, reason: `resolves to ${realRoot}, outside the workspace ${workspace}` });
    return [];
  }
  let entries: Dirent[];
  try {
    entries = await readdir(realRoot, { withFileTypes: true });
  } catch (err) {
    skipped.push({ path: root, reason: `cannot be listed: ${(err as NodeJS.ErrnoException).code ?? String(err)}` });
    return [];
  }
  const names = entries.filter((e) => !e.name.startsWith('.') && (e.isDirectory() || e.isSymbolicLink())).map((e) => e.name).sort(compare);
  if (names.length > MAX_SKILLS_PER_ROOT) {
    skipped.push({ path: root, reason: `holds ${names.length} entries; only the first ${MAX_SKILLS_PER_ROOT} were looked at` });
  }
  const skills: SkillInfo[] = [];
  for (const name of names.slice(0, MAX_SKILLS_PER_ROOT)) {
    const result = await skillOfDir(join(root, name), name, scope, realRoot);
    if ('reason' in result) {
      if (result.reason !== '') skipped.push(result);
    } else {
      skills.push(result);
    }
  }
  return skills;
}

/** One skill directory: the skill, or why not (an empty reason: not a directory, silently ignored). */
async function skillOfDir(dir: string, dirName: string, scope: SkillInfo['scope'], realRoot: string): Promise<SkillInfo | SkippedSkill> {
  let realDir: string;
  try {
    realDir = await realpath(dir);
    if (!(await stat(realDir)).isDirectory()) return { path: dir, reason: '' };
  } catch {
    return { path: dir, reason: 'is a symlink that resolves nowhere' };
  }
  if (!isInside(realDir, realRoot) || realDir === realRoot) {
    return { path: dir, reason: `resolves to ${realDir}, outside its skills directory ${realRoot}` };
  }
  const path = join(dir, 'SKILL.md');
  const read = await readTextFile(path, { maxBytes: MAX_SKILL_BYTES, overLimit: 'refuse', within: realDir });
  if (read.kind === 'missing') return { path, reason: 'is missing: a skill directory needs a SKILL.md' };
  if (read.kind === 'refused') return { path, reason: read.reason };
  const parsed = parseSkill(read.text);
  if ('error' in parsed) return { path, reason: parsed.error };
  if (parsed.name !== dirName) {
    return { path, reason: `its name "${parsed.name}" is not its directory's name "${printable(dirName)}"` };
  }
  return { name: parsed.name, description: parsed.description, path, dir, scope, digest: sha256Digest(read.bytes) };
}

/** The files under `realDir` (symlink-free), relative, sorted; symlinks listed only when they stay inside. */
async function listFiles(realDir: string): Promise<{ files: string[]; more: boolean }> {
  const files: string[] = [];
  let visited = 0;
  // more: something was left out; full: the listing stops here
  let more = false;
  let full = false;
  const walk = async (dir: string, rel: string, depth: number): Promise<void> => {
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    entries.sort((a, b) => compare(a.name, b.name));
    for (const e of entries) {
      if (full) return;
      if (e.name.startsWith('.')) continue;
      const relPath = rel === '' ? e.name : `${rel}/${e.name}`;
      if (relPath === 'SKILL.md') continue;
      if (++visited > MAX_WALK_ENTRIES) {
        more = full = true;
        return;
      }
      const path = join(dir, e.name);
      if (e.isDirectory()) {
        if (depth < MAX_WALK_DEPTH) await walk(path, relPath, depth + 1);
        else more = true;
        continue;
      }
      if (!e.isFile() && !(e.isSymbolicLink() && (await fileInside(path, realDir)))) continue;
      if (files.length >= MAX_SKILL_FILES) {
        more = full = true;
        return;
      }
      files.push(relPath);
    }
  };
  await walk(realDir, '', 0);
  return { files: files.sort(compare), more };
}

/** True when the symlink `path` resolves to a regular file inside `realDir`; a symlinked directory is never walked (no cycles, no escapes). */
async function fileInside(path: string, realDir: string): Promise<boolean> {
  try {
    const target = await realpath(path);
    return isInside(target, realDir) && (await stat(target)).isFile();
  } catch {
    // dangling: not a file the agent could read
    return false;
  }
}

/** Code-point order: the same on every machine, unlike `localeCompare`. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function oneLine(text: string): string {
  return text.replace(/[\p{Cc}\s]+/gu, ' ').trim();
}

/** A name from disk fit to quote in a message: control characters shown as `?`, at most 80 characters. */
function printable(text: string): string {
  const t = text.replace(/\p{Cc}/gu, '?');
  return t.length > 80 ? `${t.slice(0, 77)}...` : t;
}
