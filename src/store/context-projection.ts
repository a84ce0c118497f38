import type { ActorEvent, EventData } from '../protocol/events.js';
import type { BlobRef } from '../protocol/history.js';

/** A project doc the model is given, as `doc/loaded` recorded it. */
export interface DocRecord {
  path: string;
  dir: string;
  scope: 'user' | 'project';
  digest: string;
  bytes: number;
  truncated: boolean;
  textRef: BlobRef;
}

/**
 * What the model is given besides the history (design §10), folded from `doc/loaded`,
 * `skills/indexed`, `skill/loaded`, `memory/loaded` and `memory/changed`: the request is rebuilt
 * from these versions (their texts are blobs), never from the files as they are now.
 */
export interface ContextState {
  /** The turn whose first step loaded the docs, skills and memory below. */
  turn: string;
  /** Docs in the instructions, broad to narrow (the user's first). */
  docs: DocRecord[];
  /** The skill index of that turn (null: none recorded). */
  skills: { names: string[]; entries: EventData<'skills/indexed'>['skills']; textRef: BlobRef } | null;
  /** The memory files as the model was given them at that turn's first step. */
  memory: Array<{ file: 'memory' | 'user'; path: string; digest: string; summarized: boolean; textRef: BlobRef }>;
  /** Docs of deeper directories, shown after the results of the call (by provider call ID) that touched them. */
  afterCall: Record<string, DocRecord[]>;
  /** Every doc path the agent was given (in the instructions or after a call): none is given twice in a turn. */
  known: string[];
  /** Excerpts retrieved for that turn's task (null: none). */
  retrieved: { textRef: BlobRef; excerpts: number } | null;
  /** Skills `load_skill` gave the model, by name: the version it read. */
  loadedSkills: Record<string, string>;
  /** Memory files as the `memory` tool last left them (the model sees them whole from the next turn on). */
  memoryVersions: Record<string, string>;
}

function fresh(turn: string, prev: ContextState | undefined): ContextState {
  return {
    turn,
    docs: [],
    skills: null,
    memory: [],
    retrieved: null,
    afterCall: prev?.afterCall ?? {},
    known: Object.values(prev?.afterCall ?? {}).flat().map((d) => d.path),
    loadedSkills: prev?.loadedSkills ?? {},
    memoryVersions: prev?.memoryVersions ?? {},
  };
}

/** The context state of `turn`: the events of a turn's first step start it afresh (docs given after calls stay). */
function of(p: { context?: ContextState }, turn: string | undefined): ContextState {
  const t = turn ?? '';
  if (!p.context || p.context.turn !== t) p.context = fresh(t, p.context);
  return p.context;
}

function record(d: EventData<'doc/loaded'>): DocRecord {
  return { path: d.path, dir: d.dir, scope: d.scope, digest: d.digest, bytes: d.bytes, truncated: d.truncated, textRef: d.textRef };
}

/** Folds the context events into `p.context`; other events leave it alone. */
export function foldContext(p: { context?: ContextState; pending?: { calls: Array<{ callId: string; providerId: string }> } }, e: ActorEvent): void {
  switch (e.type) {
    case 'doc/loaded': {
      if (e.data.placement === 'instructions') {
        const c = of(p, e.turn);
        // a recovery that loads again what a crash left uncommitted replaces, never repeats
        c.docs = c.docs.filter((d) => d.path !== e.data.path);
        c.docs.push(record(e.data));
        if (!c.known.includes(e.data.path)) c.known.push(e.data.path);
      } else if (p.context) {
        // shown after the results of the call that touched its directory, under the call's provider ID
        const c = p.context;
        const providerId = p.pending?.calls.find((x) => x.callId === e.data.callId)?.providerId ?? e.data.callId ?? '';
        (c.afterCall[providerId] ??= []).push(record(e.data));
        if (!c.known.includes(e.data.path)) c.known.push(e.data.path);
      }
      break;
    }
    case 'skills/indexed': {
      const c = of(p, e.turn);
      c.skills = { names: e.data.skills.map((s) => s.name), entries: e.data.skills, textRef: e.data.textRef };
      break;
    }
    case 'memory/loaded': {
      const c = of(p, e.turn);
      c.memory = c.memory.filter((m) => m.file !== e.data.file);
      c.memory.push({ file: e.data.file, path: e.data.path, digest: e.data.digest, summarized: e.data.summarized, textRef: e.data.textRef });
      c.memoryVersions[e.data.file] = e.data.digest;
      break;
    }
    case 'retrieval/loaded': {
      const c = of(p, e.turn);
      c.retrieved = { textRef: e.data.textRef, excerpts: e.data.excerpts.length };
      break;
    }
    case 'request/prepared':
      // the turn's first request: its docs, skills and memory are loaded (staged before it, or none)
      of(p, e.turn);
      break;
    case 'skill/loaded':
      if (p.context) p.context.loadedSkills[e.data.name] = e.data.digest;
      break;
    case 'memory/changed':
      if (p.context) p.context.memoryVersions[e.data.file] = e.data.digest;
      break;
    default:
      break;
  }
}

/**
 * True when the open turn's docs, skills and memory are not loaded yet: its first request loads
 * them. A request prepared in the turn says they were (with it, or before it, in the log).
 */
export function contextDue(p: { context?: ContextState; openTurn: { id: string } | null }): boolean {
  return p.openTurn !== null && p.context?.turn !== p.openTurn.id;
}
