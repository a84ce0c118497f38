import { DEFAULT_CANCEL_GRACE_MS, executeTool } from '../../tools/execute.js';
import { idempotencyKey } from '../../tools/idempotency.js';
import { shapeObservation } from '../../tools/observation.js';
import type { ExecutionSemantics, ResourceKey } from '../../tools/tool.js';
import type { EventDraft } from '../../protocol/events.js';
import { holdResources, inTree, leaseResources, type ResourceHold } from './resource-holds.js';
import type { OpenCall } from '../../store/projection.js';
import { abortReason, scope, settings, type EffectContext } from '../agent/effect-context.js';
import { planCall, type CallPlan } from './tool-policy.js';
import { clipStrings } from '../agent/output-blobs.js';
import { blobScope, missingBlob } from '../agent/missing-blob.js';
import { ToolError } from '../../protocol/errors.js';
import { runtimeTool } from './runtime-tools.js';
import { loadDocsForPath } from '../agent/context-load.js';
import { resolve } from 'node:path';

/** The tool's record of what a call is about to change (undefined: it keeps none, or could not take it). */
function capturePreimage(a: EffectContext, planned: CallPlan, workspace: string): unknown {
  if (!planned.tool.preimage) return undefined;
  try {
    return planned.tool.preimage(planned.input, { workspace }) ?? undefined;
  } catch (err) {
    // nothing recorded: reconcile can then only tell "applied" from "unknown"
    a.logger.warn({ err, tool: planned.tool.name }, 'preimage not recorded');
    return undefined;
  }
}

/** True when two resource keys overlap and at least one of them writes (design §8). */
export function conflicts(x: ResourceKey, y: ResourceKey): boolean {
  if (x.mode === 'read' && y.mode === 'read') return false;
  // a process can touch anything in the workspace
  if (x.key === 'process' || y.key === 'process') return true;
  if (x.key === y.key) return true;
  // a directory and a path below it overlap
  return x.key.startsWith(`${y.key}/`) || y.key.startsWith(`${x.key}/`);
}

function anyConflict(xs: ResourceKey[], ys: ResourceKey[]): boolean {
  return xs.some((x) => ys.some((y) => conflicts(x, y)));
}

interface Waiting {
  callId: string;
  rerun: boolean;
}

/**
 * Runs the tool calls of one agent. Calls of a step whose resource keys do not conflict run at
 * once (up to `maxParallelCalls`); a call that conflicts with an earlier call of the step still
 * open waits until that one ends, so conflicting calls run in model order. Each call's
 * `tool/start` is staged when it may start and the tool runs only after that event is committed
 * (no effect without its intent in the log); its result is staged when it ends and committed by
 * the actor's next flush. Results reach the model in call order whatever order they end in.
 */
export class ToolRunner {
  private readonly waiting: Waiting[] = [];
  private readonly running = new Map<string, { keys: ResourceKey[]; done: Promise<void> }>();
  private readonly keys = new Map<string, ResourceKey[]>();
  /**
   * Plans made for `keysOf`, kept until the call starts: its tool and input are a function of the
   * call's name and arguments, so the start need not resolve, validate and digest them again.
   * (The policy's own plan, at decision and after an approval, is always made afresh.)
   */
  private readonly plans = new Map<string, CallPlan>();

  constructor(private readonly a: EffectContext) {}

  /** Asks to start a call (from the tool-call machine's `startTool` effect). */
  request(callId: string, rerun: boolean): void {
    // an abort (interrupt, deadline) dispatches nothing new: the call's machine ends it
    if (this.a.signal.aborted) return;
    if (this.running.has(callId) || this.waiting.some((w) => w.callId === callId)) return;
    this.waiting.push({ callId, rerun });
    this.schedule();
  }

  /** Calls running now. */
  get active(): number {
    return this.running.size;
  }

  /** Resolves when no call is running. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.values()].map((r) => r.done));
  }

  /** Forgets everything (a new step, or the actor stopped); running calls end through their abort signal. */
  reset(): void {
    this.waiting.length = 0;
    this.keys.clear();
    this.plans.clear();
  }

  /** Starts every waiting call that may start now. */
  schedule(): void {
    const calls = this.a.projection.pending.calls;
    for (let i = 0; i < this.waiting.length; ) {
      const w = this.waiting[i]!;
      const call = calls.find((c) => c.callId === w.callId);
      if (!call || call.observation !== null) {
        // ended meanwhile (cancelled by an abort, or a new step began)
        this.waiting.splice(i, 1);
        continue;
      }
      if (this.running.size >= this.a.ports.tooling.maxParallelCalls) return;
      if (this.blocked(call, calls)) {
        i += 1;
        continue;
      }
      this.waiting.splice(i, 1);
      this.start(call, w.rerun);
    }
  }

  private keysOf(call: OpenCall): ResourceKey[] {
    let keys = this.keys.get(call.callId);
    if (!keys) {
      try {
        const plan = planCall(this.a, call);
        this.plans.set(call.callId, plan);
        keys = plan.resources;
      } catch {
        // a call that cannot be planned never runs; it conflicts with nothing
        keys = [];
      }
      this.keys.set(call.callId, keys);
    }
    return keys;
  }

  /** A call waits while an earlier open call of its step, or a running one, touches what it touches. */
  private blocked(call: OpenCall, calls: OpenCall[]): boolean {
    const mine = this.keysOf(call);
    for (const r of this.running.values()) if (anyConflict(mine, r.keys)) return true;
    for (const other of calls) {
      if (other.index >= call.index) break;
      if (other.observation !== null || other.status !== 'valid') continue;
      if (anyConflict(mine, this.keysOf(other))) return true;
    }
    return false;
  }

  private start(call: OpenCall, rerun: boolean): void {
    const a = this.a;
    let planned: CallPlan;
    try {
      planned = this.plans.get(call.callId) ?? planCall(a, call);
      this.plans.delete(call.callId);
    } catch (err) {
      if (!(err instanceof ToolError)) throw err;
      // the tool went away (a resume with another registry): a rerun may have run before, a first start never did
      const ids = Object.assign(scope(a), { call: call.callId });
      if (rerun) a.stage({ type: 'tool/outcome_unknown', ...ids, data: { reason: err.message } });
      else a.stage({ type: 'tool/cancelled', ...ids, data: { reason: err.message, started: false, confirmed: true } });
      return;
    }
    const workspace = settings(a).workspace;
    const semantics = planned.tool.executionSemantics(planned.input, { workspace });
    let release!: () => void;
    const done = new Promise<void>((resolve) => (release = resolve));
    // running from here on, lease wait included: this agent's own conflicting calls queue behind it
    this.running.set(call.callId, { keys: this.keysOf(call), done });
    const leases = a.ports.resourceLeases;
    // Only the agents of a tree take leases: a lone agent's calls are ordered by this runner
    // alone, and pay nothing for it.
    const resources = leases && semantics.effects === 'possible' && inTree(a.projection) ? leaseResources(planned.resources, workspace) : [];
    if (resources.length === 0) return this.begin(call, planned, semantics, rerun, release, null);
    holdResources(leases!, resources, `${a.actorId}/${call.callId}`, { signal: a.signal, nowMs: () => a.ports.clock.nowMs(), logger: a.logger }).then(
      (hold) => {
        const open = a.projection.pending.calls.find((c) => c.callId === call.callId);
        if (a.halted || a.signal.aborted || !open || open.observation !== null) {
          hold.release();
          return this.settled(call.callId, release);
        }
        try {
          this.begin(call, planned, semantics, rerun, release, hold);
        } catch (err) {
          // off the effect pump, nothing else would see it
          hold.release();
          this.settled(call.callId, release);
          return a.fail(err);
        }
        a.kick();
      },
      (err: unknown) => {
        this.settled(call.callId, release);
        // aborted while it waited: the call never started, and its machine ends it
        if (!a.signal.aborted && !a.halted) a.fail(err);
      },
    );
  }

  /** A call is off the runner: the next waiting ones may start. */
  private settled(callId: string, release: () => void): void {
    this.running.delete(callId);
    release();
    if (!this.a.halted) {
      this.schedule();
      this.a.kick();
    }
  }

  /** Stages the call's `tool/start` (its leases, if any, held) and runs the tool once it is committed. */
  private begin(call: OpenCall, planned: CallPlan, semantics: ExecutionSemantics, rerun: boolean, release: () => void, hold: ResourceHold | null): void {
    const a = this.a;
    const key = idempotencyKey(call.callId, call.name, planned.input);
    const ids = Object.assign(scope(a), { call: call.callId });
    const workspace = settings(a).workspace;
    const effects = semantics.effects;
    // taken in the tick the start is staged: no call of this actor touching the same resource runs in between
    const preimage = capturePreimage(a, planned, workspace);
    const e = a.stage({
      type: 'tool/start',
      ...ids,
      data: {
        name: call.name,
        // blob-stored arguments: their parse is recorded with long strings cut, and the blob named
        input: call.argumentsRef ? clipStrings(planned.input, call.argumentsRef) : planned.input,
        effects,
        idempotencyKey: key,
        rerun,
        ...(call.argumentsRef ? { argumentsRef: call.argumentsRef } : {}),
        ...(preimage !== undefined ? { preimage } : {}),
      },
    });
    if (rerun) {
      const why = semantics.effects === 'none' ? 'it has no side effects'
        : semantics.recovery.kind === 'reconcile' ? `reconcile found it not applied (key ${key})`
        : `it is idempotent under key ${key}`;
      a.noteRecovered(`call ${call.callId} (${call.name}) run again: ${why}`);
    }
    // No effect starts without a committed tool/start: the tool runs once this event is in the log.
    a.afterCommit(e.seq, {
      run: () => {
        this.execute(call, planned, key, ids, rerun, effects, hold).finally(() => {
          this.running.delete(call.callId);
          release();
          if (!a.halted) {
            this.schedule();
            a.kick();
          }
        });
      },
      drop: () => {
        hold?.release();
        this.running.delete(call.callId);
        release();
      },
    });
  }

  private async execute(
    call: OpenCall, planned: CallPlan, key: string, ids: { turn: string; step: string; call: string }, rerun: boolean, effects: 'none' | 'possible',
    hold: ResourceHold | null,
  ): Promise<void> {
    const a = this.a;
    const t = a.ports.tooling;
    // The call's end: its leases go once that end is committed, so no other agent's call touches
    // the resource while the log could still lose what this one did to it.
    const end = (d: EventDraft): void => {
      const e = a.stage(d);
      if (hold) {
        const h = hold;
        hold = null;
        a.afterCommit(e.seq, { run: () => h.release(), drop: () => h.release() });
      }
    };
    try {
      // the runtime's own tools settle an abort themselves (a question is cancelled with its call)
      const own = runtimeTool(call.name);
      if (own) {
        await own.run(a, { call, input: planned.input, ids, rerun });
        return;
      }
      if (a.signal.aborted) {
        // its tool/start is committed, but the tool was never called: nothing ran
        end({ type: 'tool/cancelled', ...ids, data: { reason: abortReason(a), started: true, confirmed: true } });
        return;
      }
      const grant = call.grant ?? { network: false, envAllow: [] };
      const result = await executeTool(
        planned.tool,
        planned.input,
        {
          workspace: settings(a).workspace,
          callId: call.callId,
          idempotencyKey: key,
          epoch: a.epoch,
          logger: a.logger,
          signal: a.signal,
          env: t.env,
          sandbox: { bwrapPath: t.bwrapPath, network: grant.network, envAllow: grant.envAllow, hide: t.hiddenPaths },
          artifacts: { read: (id) => this.readArtifact(id) },
        },
        planned.tool.timeoutMs ?? 120_000,
        { effects, graceMs: t.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS },
      );
      a.ports.faults.hit('before:tool/result', a.actorId);
      // cancelled only once the call is known to have stopped; an effectful one that did not say so may have run
      if (result.errorClass === 'cancelled') {
        end({ type: 'tool/cancelled', ...ids, data: { reason: abortReason(a), started: true, confirmed: true } });
        return;
      }
      if (result.errorClass === 'unknown') {
        const reason = t.redactor.redact(result.error?.message ?? `${call.name} did not confirm it stopped`).text;
        end({ type: 'tool/outcome_unknown', ...ids, data: { reason } });
        return;
      }
      const shaped = shapeObservation(result.output, { budgetBytes: t.observationBudgetBytes, redactor: t.redactor });
      // a file in a deeper directory with its own AGENTS.md: the model reads it after this step's results
      if (result.ok) {
        for (const touched of touchedPaths(call.name, planned.input)) {
          await loadDocsForPath(a, ids, resolve(settings(a).workspace, touched)).catch((err: unknown) => a.logger.warn({ err, path: touched }, 'the project docs of a path were not loaded'));
        }
      }
      let artifact = null;
      if (shaped.artifact) {
        const { content, lines: _lines, ...meta } = shaped.artifact;
        // stored before the result that names it is committed: the log never points at a missing blob
        await a.ports.blobs.put(content);
        artifact = { id: meta.id, digest: meta.digest, bytes: meta.bytes, binary: meta.binary };
      }
      const message = result.error ? t.redactor.redact(result.error.message).text : null;
      end({
        type: 'tool/result',
        ...ids,
        data: {
          ok: result.ok,
          output: shaped.output,
          error: result.error ? { code: result.error.code, message: message!, retryable: false } : null,
          durationMs: result.durationMs,
          artifact,
          source: `tool:${call.name}`,
          trust: 'untrusted',
          redactions: shaped.redactions,
        },
      });
    } catch (err) {
      // a halted incarnation commits nothing more: the next one closes the call
      if (!a.halted) a.fail(err);
    } finally {
      // no end of the call was staged to release them after (a runtime tool, an error): now
      hold?.release();
    }
  }

  /**
   * An artifact's bytes; undefined for an ID this agent never had. One its log names whose blob
   * is gone is a tool error the model reads, naming the event that stored it: no retry can help.
   */
  private async readArtifact(id: string): Promise<Uint8Array | undefined> {
    const digest = this.a.projection.artifacts?.[id];
    if (!digest) return undefined;
    const bytes = await this.a.ports.blobs.get(digest);
    if (bytes !== undefined) return bytes;
    const missing = await missingBlob(blobScope(this.a), { digest }, `artifact ${id}`);
    throw new ToolError(missing.code, missing.userMessage(), { cause: missing });
  }
}

/** Tools whose `path` names where the agent read or wrote: a deeper AGENTS.md there applies from then on. */
const PATH_TOOLS: ReadonlySet<string> = new Set(['read_file', 'write_file', 'list_dir', 'search']);

/** The paths a call touched (relative to the workspace): a file tool's `path`, a shell's `cwd`, the files a patch names. */
export function touchedPaths(tool: string, input: unknown): string[] {
  const i = (input ?? {}) as { path?: unknown; cwd?: unknown; patch?: unknown };
  if (PATH_TOOLS.has(tool)) return typeof i.path === 'string' && i.path !== '' ? [i.path] : [];
  if (tool === 'shell') return typeof i.cwd === 'string' && i.cwd !== '' && i.cwd !== '.' ? [i.cwd] : [];
  if (tool === 'apply_patch' && typeof i.patch === 'string') {
    const paths = new Set<string>();
    for (const m of i.patch.matchAll(/^(?:\+\+\+|---) (?:[ab]\/)?(\S+)/gm)) if (m[1] !== '/dev/null') paths.add(m[1]!);
    return [...paths].slice(0, 20);
  }
  return [];
}
