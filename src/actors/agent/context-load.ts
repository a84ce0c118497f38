import { relative } from 'node:path';
import { sha256Digest } from '../../protocol/canonical-json.js';
import { StoreError } from '../../protocol/errors.js';
import type { BlobRef } from '../../protocol/history.js';
import { collectProjectDocs, docsForPath, projectDocText, projectRoot } from '../../knowledge/project-docs.js';
import { discoverSkills, skillIndexText } from '../../knowledge/skills.js';
import { memoryContextText, memoryPaths, readMemory } from '../../knowledge/memory.js';
import { ContextAssembler, wrapUntrusted } from '../../context/assembly.js';
import type { Excerpt } from '../../knowledge/retriever.js';
import { contextDue } from '../../store/context-projection.js';
import { scope, settings, type EffectContext } from './effect-context.js';

// What a turn's requests are given besides the history (design §10), loaded at the turn's first
// step and recorded before any request holds it: the project docs (AGENTS.md) from the project
// root down to the workspace, the skill index, the memory files. Each text the model is sent is a
// blob named in its event, so a request is rebuilt from the versions recorded, not from the files.

/** Bytes the project docs may take together by default (as Codex's project doc limit). */
export const DEFAULT_DOCS_MAX_BYTES = 32 * 1024;
/** Bytes of a memory file given whole by default; past it, its index. */
export const DEFAULT_MEMORY_MAX_BYTES = 8 * 1024;

/** The turn's context cache, made on first use. */
export function contextCache(a: EffectContext): NonNullable<EffectContext['turn']['context']> {
  a.turn.context ??= { assembler: new ContextAssembler(), texts: new Map(), last: null };
  return a.turn.context;
}

/**
 * Stores a text the model is given and returns its reference; the commit that names it waits
 * for the write (a doc's text cannot be rebuilt once its file changed).
 */
function putText(a: EffectContext, text: string): BlobRef {
  const digest = sha256Digest(text);
  contextCache(a).texts.set(digest, text);
  a.holdCommit(a.ports.blobs.put(text, digest));
  return { digest, bytes: Buffer.byteLength(text) };
}

/** A text the log names, from this turn's cache or the blob store. */
export async function textOf(a: EffectContext, ref: BlobRef, what: string): Promise<string> {
  const cache = contextCache(a).texts;
  const hit = cache.get(ref.digest);
  if (hit !== undefined) return hit;
  const text = await a.ports.blobs.getText(ref.digest);
  if (text === undefined) {
    throw new StoreError('store.blob_missing', `the text of ${what} (${ref.digest}) is not in the blob store`, {
      hint: 'the blob store lost what the log names; `actorloop gc` never removes a blob a log names',
    });
  }
  cache.set(ref.digest, text);
  return text;
}

/**
 * Loads the open turn's docs, skill index and memory when its first request is prepared, staging
 * `doc/loaded`, `skills/indexed` and `memory/loaded` for what there is. The turn's first
 * `request/prepared` marks them loaded; a crash before it loads them again (the projection
 * replaces what it had of the same file).
 */
export async function loadTurnContext(a: EffectContext): Promise<void> {
  if (!contextDue(a.projection)) return;
  const s = settings(a);
  const ids = scope(a);
  const userDir = a.ports.tooling.userConfigDir ?? null;
  const root = projectRoot(s.workspace);
  const { docs, warnings } = await collectProjectDocs({ cwd: s.workspace, userConfigDir: userDir });
  for (const w of warnings) a.logger.warn({ warning: w }, 'a project doc was not loaded');
  for (const d of docs) {
    a.stage({
      type: 'doc/loaded',
      ...ids,
      data: { path: d.path, dir: d.dir, scope: d.scope, digest: d.digest, bytes: d.bytes, truncated: d.truncated, placement: 'instructions', textRef: putText(a, projectDocText(d, root)) },
    });
  }
  // skills live at the project root (`.agents/skills`), as AGENTS.md's broadest level does
  const { skills, skipped } = await discoverSkills({ workspace: root, userConfigDir: userDir });
  for (const k of skipped as Array<{ path: string; reason: string }>) a.logger.warn({ path: k.path, reason: k.reason }, 'a skill was skipped');
  if (skills.length > 0) a.stage({
    type: 'skills/indexed',
    ...ids,
    data: {
      skills: skills.map((k) => ({ name: k.name, description: k.description, path: k.path, scope: k.scope, digest: k.digest })),
      textRef: putText(a, skillIndexText(skills)),
    },
  });
  await retrieveForTask(a, root);
  if (userDir === null) return;
  const paths = memoryPaths(s.workspace, userDir);
  const budget = s.context?.memoryMaxBytes ?? DEFAULT_MEMORY_MAX_BYTES;
  for (const file of ['user', 'memory'] as const) {
    const snap = await readMemory(paths, file);
    if (!snap.exists) continue;
    const { text, summarized } = memoryContextText(snap, budget);
    a.stage({
      type: 'memory/loaded',
      ...ids,
      data: { file, path: snap.path, digest: snap.digest, bytes: snap.bytes, summarized, textRef: putText(a, text) },
    });
  }
}

/**
 * Excerpts for the turn's task (its last user message), when its settings ask for some and the
 * host has a retriever: recorded as `retrieval/loaded`, their text wrapped as data. A retriever
 * that fails costs the turn its excerpts, never the turn.
 */
async function retrieveForTask(a: EffectContext, root: string): Promise<void> {
  const budget = settings(a).context?.retrievalTokens ?? 0;
  const retriever = a.ports.tooling.retriever ?? null;
  if (budget <= 0 || retriever === null) return;
  const task = [...a.projection.history].reverse().find((h) => h.role === 'user');
  const query = task && task.role === 'user' ? task.content.slice(0, 500) : '';
  if (query.trim() === '') return;
  let excerpts: Excerpt[];
  try {
    excerpts = await retriever.search({ text: query, scope: { root }, tokenBudget: budget }, a.signal);
  } catch (err) {
    a.logger.warn({ err, retriever: retriever.name }, 'no excerpts were retrieved for the task');
    return;
  }
  const text = excerpts.length === 0 ? '' : [
    `Excerpts of the project's files that may bear on the task (found by ${retriever.name}; read the files for more):`,
    ...excerpts.map((x) => wrapUntrusted(`retrieval:${x.source}:${x.startLine}-${x.endLine}`, x.text)),
  ].join('\n\n');
  a.stage({
    type: 'retrieval/loaded',
    ...scope(a),
    data: {
      retriever: retriever.name,
      query,
      tokenBudget: budget,
      excerpts: excerpts.map((x) => ({ source: x.source, version: x.version, startLine: x.startLine, endLine: x.endLine, tokens: x.tokens })),
      textRef: putText(a, text),
    },
  });
}

/**
 * After a call that read or wrote `path`: the docs of deeper directories on the way to it that
 * the turn was not given yet, staged as `doc/loaded` (`after_call`) in the call's scope. The
 * model reads them after that step's results, for the rest of the turn.
 */
export async function loadDocsForPath(a: EffectContext, callScope: { turn: string; step: string; call: string }, path: string): Promise<void> {
  const s = settings(a);
  const root = projectRoot(s.workspace);
  const known = new Set(a.projection.context?.known ?? []);
  const { docs: found, warnings } = await docsForPath({ root, path, known });
  for (const w of warnings) a.logger.warn({ warning: w }, 'a project doc was not loaded');
  for (const d of found) {
    a.stage({
      type: 'doc/loaded',
      ...callScope,
      data: {
        path: d.path, dir: d.dir, scope: d.scope, digest: d.digest, bytes: d.bytes, truncated: d.truncated,
        placement: 'after_call', callId: callScope.call, textRef: putText(a, projectDocText(d, root)),
      },
    });
  }
}

/** A doc's scope as `context` names it: its path from the project root (the user's under `~user`). */
export function docScope(path: string, root: string, userScope: boolean): string {
  return userScope ? `user:${path}` : relative(root, path) || path;
}
