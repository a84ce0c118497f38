import type { HistoryItem, Usage } from '../../protocol/history.js';
import type { PreparedRequest } from '../../model/model-port.js';
import { costOf } from '../../model/pricing.js';
import { modelName } from '../../model/model-spec.js';
import { settings, type EffectContext } from './effect-context.js';
import type { BlobRef } from '../../protocol/history.js';
import type { Assembly, TextContribution } from '../../context/assembly.js';
import { projectRoot } from '../../knowledge/project-docs.js';
import { contextCache, DEFAULT_DOCS_MAX_BYTES, docScope, textOf } from './context-load.js';
import { LOAD_SKILL, MEMORY, MEMORY_SEARCH } from '../../tools/builtins/knowledge-tools.js';

// The open step's model request: the turn's model, the request prepared from the history, and
// what an attempt's usage costs.

/** The cost of an attempt's usage at the turn's model's price; null when the price is unknown. */
export function costFor(a: EffectContext, usage: Usage): number | null {
  return costOf(usage, a.ports.pricing?.(modelName(settings(a).model)) ?? null);
}

/** Usage estimated from what was sent and received (about 4 of each per token), marked `estimated`: for a provider that reports none. */
export function estimateUsage(bytesIn: number, charsOut: number): Usage {
  return { inputTokens: Math.ceil(bytesIn / 4), outputTokens: Math.ceil(charsOut / 4), estimated: true };
}

/** The open turn's model adapter, made once per turn. */
export async function ensureModel(a: EffectContext) {
  a.turn.model ??= await a.ports.modelFor(a.projection.openTurn!.settings, a.projection.modelResponses);
  return a.turn.model;
}

/**
 * The tokens kept free of the window (design §10): the answer's cap (the turn's, else the model's
 * up to 16,384, else 4,096) and the next observation (the observation budget, four bytes a token);
 * without a cap of the turn's own, neither takes more than a quarter and an eighth of the window,
 * so a small window (a local model's 8,192) keeps room for the request.
 */
function reserveOf(a: EffectContext, outputCap: number | null, window: number | null): number {
  const s = settings(a);
  const w = window ?? Number.POSITIVE_INFINITY;
  const answer = s.maxOutputTokens ?? Math.min(outputCap ?? DEFAULT_OUTPUT_RESERVE, MAX_OUTPUT_RESERVE, Math.floor(w / 4));
  return answer + Math.min(Math.ceil(a.ports.tooling.observationBudgetBytes / 4), Math.floor(w / 8));
}

/** Tokens kept for an answer when neither the turn nor the model names a cap. */
const DEFAULT_OUTPUT_RESERVE = 4_096;
/** The most kept for an answer by default: a model that may answer 100k tokens rarely does. */
const MAX_OUTPUT_RESERVE = 16_384;

/**
 * Prepares the open step's request from the history, and `extra` items after it (what the step's
 * prepare adds): the contributions are assembled (src/context) from the turn's recorded docs,
 * skill index and memory, the tool schemas, the history and `extra`, and the adapter writes the
 * body. The assembly (contributions, budget, overflow) is kept for `request/prepared`.
 */
export async function prepare(a: EffectContext, extra: HistoryItem[] = []): Promise<PreparedRequest> {
  const model = await ensureModel(a);
  const s = settings(a);
  const name = modelName(s.model);
  const cache = contextCache(a);
  const c = a.projection.context;
  const root = projectRoot(s.workspace);
  const text = (ref: BlobRef, what: string) => textOf(a, ref, what);
  const docs: TextContribution[] = [];
  for (const d of c?.docs ?? []) {
    docs.push({ source: 'project_doc', scope: docScope(d.path, root, d.scope === 'user'), trust: 'project', text: await text(d.textRef, d.path), digest: d.textRef.digest });
  }
  const afterCall = new Map<string, TextContribution[]>();
  for (const [callId, ds] of Object.entries(c?.afterCall ?? {})) {
    const list: TextContribution[] = [];
    for (const d of ds) list.push({ source: 'project_doc', scope: docScope(d.path, root, false), trust: 'project', text: await text(d.textRef, d.path), digest: d.textRef.digest });
    afterCall.set(callId, list);
  }
  const skills = c?.skills ?? null;
  const memory: TextContribution[] = [];
  for (const m of c?.memory ?? []) {
    memory.push({ source: 'memory', scope: m.file === 'user' ? 'USER.md' : 'MEMORY.md', trust: 'project', text: await text(m.textRef, m.path), digest: m.textRef.digest });
  }
  const retrieved = c?.retrieved ? await text(c.retrieved.textRef, 'the retrieved excerpts') : '';
  // a tool with nothing to work on is not offered: load_skill without skills, memory_search while
  // memory is given whole, memory on a host that keeps none (no user config dir)
  const noMemory = (a.ports.tooling.userConfigDir ?? null) === null;
  const offered = s.tools.filter((t) => !(t === LOAD_SKILL && (skills?.names.length ?? 0) === 0)
    && !(t === MEMORY_SEARCH && !(c?.memory ?? []).some((m) => m.summarized))
    && !(t === MEMORY && noMemory));
  const caps = model.capabilities(name);
  const window = s.context?.window ?? caps.contextWindow;
  const assembly = cache.assembler.assemble({
    model: name,
    instructions: s.instructions,
    docs,
    docsMaxBytes: s.context?.docsMaxBytes ?? DEFAULT_DOCS_MAX_BYTES,
    skillIndex: skills ? { source: 'skill_index', scope: `${skills.names.length} skills`, trust: 'project', text: await text(skills.textRef, 'the skill index'), digest: skills.textRef.digest } : null,
    memory,
    retrieved: retrieved === '' ? null : { source: 'retrieval', scope: `${c!.retrieved!.excerpts} excerpts`, trust: 'untrusted', text: retrieved, digest: c!.retrieved!.textRef.digest },
    tools: a.ports.tools.specs(offered),
    // Model output the log keeps as a blob is sent whole (resolved items are kept by identity).
    history: await a.outputs.history(a.projection.history),
    checkpoints: new Map((a.projection.compaction?.checkpoints ?? []).filter((k) => k.at !== null).map((k) => [k.at!, k.id])),
    afterCall,
    inbox: extra,
    window,
    reserve: reserveOf(a, caps.maxOutputTokens, window),
    maxOutputTokens: s.maxOutputTokens ?? null,
    ...(s.outputSchema ? { outputSchema: s.outputSchema } : {}),
    ...(s.effort ? { effort: s.effort } : {}),
  });
  const prepared = model.prepare(assembly.request);
  // Only the step's own request is kept: older ones are in the blob store, and bodies grow with history.
  a.turn.prepared.clear();
  a.turn.prepared.set(prepared.digest, prepared);
  cache.last = { digest: prepared.digest, assembly };
  return prepared;
}

/** The assembly of the request prepared last with this digest (null: prepared by another incarnation). */
export function assemblyOf(a: EffectContext, digest: string): Assembly | null {
  const last = a.turn.context?.last;
  return last && last.digest === digest ? last.assembly : null;
}
