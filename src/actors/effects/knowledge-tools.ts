import { ActorloopError } from '../../protocol/errors.js';
import { loadedSkillText, loadSkill, type SkillInfo } from '../../knowledge/skills.js';
import { editMemory, memoryPaths, readMemory, searchMemory, type MemoryEdit, type MemoryPaths } from '../../knowledge/memory.js';
import { LOAD_SKILL, MEMORY, MEMORY_SEARCH, type LoadSkillInput, type MemoryInput, type MemorySearchInput } from '../../tools/builtins/knowledge-tools.js';
import { settings, type EffectContext } from '../agent/effect-context.js';
import { stageRuntimeResult, type RuntimeTool, type RuntimeToolRun } from '../agent/runtime-tool.js';

// load_skill, memory and memory_search as the runtime carries them out (design §10): each
// stages what it gave the model or changed (`skill/loaded`, `memory/changed`) with the call's
// result, in one tick, so a crash leaves both or neither in the log.

const stageResult = stageRuntimeResult;

function failed(a: EffectContext, r: RuntimeToolRun, tool: string, err: unknown): void {
  if (!(err instanceof ActorloopError)) throw err;
  const message = err.userMessage();
  stageResult(a, r, tool, `${tool} failed: ${message}`, { code: err.code, message });
}

/** Cuts a loaded skill past the observation budget, saying where the whole is. */
function bounded(text: string, budget: number, path: string): string {
  if (Buffer.byteLength(text) <= budget) return text;
  const head = Buffer.from(text).subarray(0, budget).toString('utf8').replace(/\uFFFD+$/, '');
  return `${head}\n[cut here: the skill is longer than a tool result may be; read the rest with read_file ${path}]`;
}

/** `load_skill`: the body of a skill the turn indexed, and the list of its other files. */
export const loadSkillRuntime: RuntimeTool = {
  name: LOAD_SKILL,
  async run(a, r) {
    const { name } = r.input as LoadSkillInput;
    const entries = a.projection.context?.skills?.entries ?? [];
    const entry = entries.find((s) => s.name === name);
    if (!entry) {
      const known = entries.map((s) => s.name);
      const message = known.length === 0
        ? `no skill named "${name}": this workspace has no skills`
        : `no skill named "${name}"; the skills are: ${known.join(', ')}`;
      stageResult(a, r, LOAD_SKILL, message, { code: 'skill.not_found', message });
      return;
    }
    const skill: SkillInfo = { ...entry, dir: entry.path.replace(/\/SKILL\.md$/, '') };
    try {
      const loaded = await loadSkill(skill);
      a.stage({ type: 'skill/loaded', ...r.ids, data: { name, path: entry.path, digest: loaded.digest, bytes: Buffer.byteLength(loaded.body) } });
      stageResult(a, r, LOAD_SKILL, bounded(loadedSkillText(skill, loaded), a.ports.tooling.observationBudgetBytes, entry.path), null);
    } catch (err) {
      failed(a, r, LOAD_SKILL, err);
    }
  },
};

/** The memory files of the open turn's workspace, or null when this host keeps none (no user config dir). */
function pathsOf(a: EffectContext): MemoryPaths | null {
  const dir = a.ports.tooling.userConfigDir ?? null;
  return dir === null ? null : memoryPaths(settings(a).workspace, dir);
}

const NO_MEMORY = 'memory is not kept on this host: it has no user config dir';

/** True when the file already shows the edit: a rerun after a crash between the write and its commit. */
function alreadyApplied(content: string, edit: MemoryEdit): boolean {
  switch (edit.action) {
    case 'add':
      return content.split('\n').some((l) => l.replace(/^- /, '').trim() === edit.text.trim());
    case 'replace':
      return !content.includes(edit.oldText) && content.includes(edit.text);
    case 'remove':
      return !content.includes(edit.oldText);
  }
}

function editOf(input: MemoryInput): MemoryEdit {
  switch (input.action) {
    case 'add':
      return { action: 'add', text: input.text! };
    case 'replace':
      return { action: 'replace', oldText: input.old_text!, text: input.text! };
    case 'remove':
      return { action: 'remove', oldText: input.old_text! };
  }
}

const FILE_NAMES = { memory: 'MEMORY.md', user: 'USER.md' } as const;

/** `memory`: edits MEMORY.md or USER.md under the file's lock, and records the versions before and after. */
export const memoryRuntime: RuntimeTool = {
  name: MEMORY,
  async run(a, r) {
    const input = r.input as MemoryInput;
    const paths = pathsOf(a);
    if (!paths) {
      stageResult(a, r, MEMORY, NO_MEMORY, { code: 'memory.unavailable', message: NO_MEMORY });
      return;
    }
    const edit = editOf(input);
    try {
      if (r.rerun) {
        const now = await readMemory(paths, input.file);
        if (alreadyApplied(now.content, edit)) {
          a.stage({ type: 'memory/changed', ...r.ids, data: { file: input.file, path: now.path, action: edit.action, before: now.digest, digest: now.digest, bytes: now.bytes } });
          stageResult(a, r, MEMORY, `${FILE_NAMES[input.file]}: ${edit.action} was made before the restart (version ${now.digest})`, null);
          return;
        }
      }
      const { before, after, changed } = await editMemory(paths, input.file, edit);
      if (changed) {
        a.stage({ type: 'memory/changed', ...r.ids, data: { file: input.file, path: after.path, action: edit.action, before: before.digest, digest: after.digest, bytes: after.bytes } });
      }
      stageResult(a, r, MEMORY, `${FILE_NAMES[input.file]}: ${changed ? `${edit.action} done` : 'already so, nothing changed'} (version ${after.digest}); later sessions in this workspace are given it`, null);
    } catch (err) {
      failed(a, r, MEMORY, err);
    }
  },
};

/** `memory_search`: excerpts of both memory files with their file, version and line range. */
export const memorySearchRuntime: RuntimeTool = {
  name: MEMORY_SEARCH,
  async run(a, r) {
    const { query } = r.input as MemorySearchInput;
    const paths = pathsOf(a);
    if (!paths) {
      stageResult(a, r, MEMORY_SEARCH, NO_MEMORY, { code: 'memory.unavailable', message: NO_MEMORY });
      return;
    }
    try {
      const found = await searchMemory(paths, query, { maxResults: 20 });
      const output = found.length === 0
        ? `nothing in ${FILE_NAMES.memory} or ${FILE_NAMES.user} matches "${query}"`
        : found.map((x) => `${FILE_NAMES[x.file]} lines ${x.startLine}-${x.endLine} (version ${x.digest}):\n${x.text}`).join('\n\n');
      stageResult(a, r, MEMORY_SEARCH, output, null);
    } catch (err) {
      failed(a, r, MEMORY_SEARCH, err);
    }
  },
};
