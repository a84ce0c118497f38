import { parseEvent, type ActorEvent, type EventData, type EventOf, type EventType, type TurnSettings } from '../../src/protocol/events.js';

/** Actor every fixture log belongs to. */
export const ACTOR = 'agt_01TESTACTOR0000000000000000';

const T0_MS = Date.parse('2026-01-01T00:00:00.000Z');

const SETTINGS: TurnSettings = {
  model: 'scripted',
  baseUrl: null,
  workspace: '/tmp/ws',
  tools: ['read_file', 'write_file'],
  instructions: 'Be brief.',
  budgets: { maxSteps: 10, maxToolCalls: null, deadlineAt: null },
  maxAttempts: 3,
};

const USAGE = { inputTokens: 100, outputTokens: 20, estimated: false };

/** Scope IDs an event may carry. */
export interface Scope {
  turn?: string;
  step?: string;
  attempt?: string;
  call?: string;
}

/** How a tool call is recorded: what `tool/call` says about it. */
export interface CallSpec {
  name?: string;
  effects?: 'none' | 'possible';
  recovery?: 'rerun' | 'idempotent' | 'reconcile' | 'manual';
  status?: 'valid' | 'unknown_tool' | 'invalid_arguments';
}

/**
 * Writes an actor's log the way the runtime does (agent-effects, recovery), one call per fact.
 * Every event goes through `parseEvent`, so a fixture can't drift from the schema. IDs are
 * short and counted (`turn_1`, `call_2`) so a failing assertion reads like the log.
 */
export class LogBuilder {
  readonly events: ActorEvent[] = [];
  epoch = 1;
  turn: string | undefined;
  step: string | undefined;
  attempt: string | undefined;
  private readonly counts = { turn: 0, step: 0, att: 0, call: 0 };
  private readonly keys = new Map<string, string>();

  /** Appends one event with the next seq, at one second per seq after T0. */
  push<T extends EventType>(type: T, data: EventData<T>, scope: Scope = {}): EventOf<T> {
    const seq = this.events.length + 1;
    const raw = { v: 1, seq, id: `evt_${seq}`, at: new Date(T0_MS + seq * 1000).toISOString(), epoch: this.epoch, actor: ACTOR, ...scope, type, data };
    const e = parseEvent(raw);
    this.events.push(e);
    return e as EventOf<T>;
  }

  private next(kind: keyof LogBuilder['counts']): string {
    this.counts[kind] += 1;
    return `${kind}_${this.counts[kind]}`;
  }

  private get inStep(): Scope {
    return { turn: this.turn, step: this.step };
  }

  /** `inbox/received` of a user message with a turn request. */
  receive(messageId: string, content = 'Summarise notes.txt'): this {
    const request = { model: 'scripted', baseUrl: null, workspace: '/tmp/ws', tools: null, instructions: null, maxSteps: null, maxToolCalls: null, deadlineSeconds: null, maxAttempts: null };
    this.push('inbox/received', { messageId, kind: 'user_message', from: 'cli', content, request });
    return this;
  }

  /** `turn/start` claiming `messageIds`, then one `user/message` each (one commit in the runtime). */
  startTurn(...messageIds: string[]): this {
    this.turn = this.next('turn');
    this.push('turn/start', { source: 'user_message', messageIds, settings: SETTINGS }, { turn: this.turn });
    for (const id of messageIds) this.push('user/message', { messageId: id, content: 'Summarise notes.txt' }, { turn: this.turn });
    return this;
  }

  /** `turn/end` of the open turn. */
  endTurn(outcome: EventData<'turn/end'>['outcome'] = 'completed', answer: string | null = 'Done.'): this {
    this.push('turn/end', { outcome, reason: null, answer, steps: 2, toolCalls: 1, usage: USAGE }, { turn: this.turn });
    this.turn = undefined;
    return this;
  }

  /** `step/start` and its `request/prepared`. */
  startStep(index: number): this {
    this.step = this.next('step');
    this.push('step/start', { index, maxAttempts: 3, toolBudgetLeft: null, model: 'scripted', maxOutputTokens: null }, this.inStep);
    this.push('request/prepared', { digest: `sha256-${this.step}`, bytes: 400, messages: 1 }, this.inStep);
    return this;
  }

  /** `step/end` of the open step. */
  endStep(outcome: EventData<'step/end'>['outcome'], toolCalls = 0): this {
    this.push('step/end', { outcome, reason: null, toolCalls }, this.inStep);
    this.step = undefined;
    return this;
  }

  /** `attempt/start` in the open step. */
  startAttempt(index = 1): this {
    this.attempt = this.next('att');
    this.push('attempt/start', { index, requestDigest: `sha256-${this.step}` }, { ...this.inStep, attempt: this.attempt });
    return this;
  }

  /** `attempt/end` of the open attempt, usage settled. */
  endAttempt(outcome: EventData<'attempt/end'>['outcome'] = 'succeeded'): this {
    this.push('attempt/end', { outcome, error: null, usage: USAGE, backoffMs: null, latencyMs: 900 }, { ...this.inStep, attempt: this.attempt });
    return this;
  }

  /** `budget/reserved` of the open attempt's worst case (the runtime commits it with attempt/start). */
  reserve(tokens: number): this {
    this.push('budget/reserved', {
      reservationId: `rsv_${this.attempt}`, scope: 'turn', kind: 'attempt', attemptId: this.attempt!, tokens, costUsd: null, outputTokens: 10,
    }, this.inStep);
    return this;
  }

  /** `budget/settled` of the open (or last) attempt's reservation. */
  settle(tokens: number, outcome: 'charged' | 'released' = 'charged'): this {
    this.push('budget/settled', { reservationId: `rsv_${this.attempt}`, tokens, costUsd: null, outcome }, this.inStep);
    return this;
  }

  /** A succeeded attempt whose output is a final answer (attempt/end + assistant/accepted). */
  answer(content: string): this {
    this.startAttempt().endAttempt();
    this.push('assistant/accepted', { content, toolCalls: [], finishReason: 'stop' }, { ...this.inStep, attempt: this.attempt });
    return this;
  }

  /** `assistant/accepted` of the last attempt, asking for one tool call. */
  acceptCall(name: string): this {
    const toolCalls = [{ id: `prov_${this.counts.call + 1}`, name, arguments: '{"path":"notes.txt"}' }];
    this.push('assistant/accepted', { content: null, toolCalls, finishReason: 'tool_calls' }, { ...this.inStep, attempt: this.attempt });
    return this;
  }

  /** `tool/call`, and `policy/decided` (allow) for a valid one. The new call ID is `lastCall`. */
  call(spec: CallSpec = {}): this {
    const { name = 'read_file', effects = 'none', recovery = 'rerun', status = 'valid' } = spec;
    const call = this.next('call');
    const valid = status === 'valid';
    this.push('tool/call', {
      index: 0, providerId: `prov_${this.counts.call}`, name, arguments: '{"path":"notes.txt"}', status,
      error: valid ? null : 'bad arguments', effects: valid ? effects : null, recovery: valid ? recovery : null, withinBudget: true,
    }, { ...this.inStep, call });
    if (valid) this.push('policy/decided', { decision: 'allow', rule: 'builtin:allow-visible-tools', reason: null }, { ...this.inStep, call });
    return this;
  }

  /** ID of the last `tool/call`. */
  get lastCall(): string {
    return `call_${this.counts.call}`;
  }

  /** `tool/start` of a call; a rerun reuses the call's idempotency key, as the runtime derives it. */
  startTool(call: string, opts: { effects?: 'none' | 'possible'; rerun?: boolean; name?: string } = {}): this {
    const { effects = 'none', rerun = false, name = 'read_file' } = opts;
    if (!this.keys.has(call)) this.keys.set(call, `idem_${call}`);
    this.push('tool/start', { name, input: { path: 'notes.txt' }, effects, idempotencyKey: this.keys.get(call)!, rerun }, { ...this.inStep, call });
    return this;
  }

  /** `tool/result` of a call. */
  result(call: string, ok = true): this {
    this.push('tool/result', { ok, output: ok ? 'notes' : 'bad arguments', error: null, durationMs: 5 }, { ...this.inStep, call });
    return this;
  }

  /** `tool/reconciled` of a call, with the verdict its tool gave. */
  reconciled(call: string, verdict: 'applied' | 'not_applied' | 'unknown'): this {
    this.push('tool/reconciled', {
      verdict, reason: verdict === 'unknown' ? 'the file changed' : null, output: verdict === 'applied' ? 'wrote 5 bytes' : null, durationMs: 1,
    }, { ...this.inStep, call });
    return this;
  }

  /** `tool/cancelled` of a call, with what the cancel says about its start and its stop (absent: an older log). */
  cancelled(call: string, facts: { started?: boolean; confirmed?: boolean } = {}): this {
    this.push('tool/cancelled', { reason: 'interrupted', ...facts }, { ...this.inStep, call });
    return this;
  }

  /** `actor/released`: the incarnation let go of the actor with work open (a drained host). */
  released(reason = 'host h1 drained'): this {
    this.push('actor/released', { reason });
    return this;
  }

  /** `tool/outcome_unknown` of a call. */
  outcomeUnknown(call: string): this {
    this.push('tool/outcome_unknown', { reason: 'the process stopped after it started' }, { ...this.inStep, call });
    return this;
  }

  /**
   * A crash and the next incarnation: a higher epoch, `actor/rehydrated`, `recovery/started`;
   * with `killed` (a point, or null: not known) first the `actor/killed` the runtime now writes.
   */
  crash(opts: { killed?: string | null } = {}): this {
    const lastSeq = this.events.length;
    this.epoch += 1;
    if (opts.killed !== undefined) {
      this.push('actor/killed', { point: opts.killed, detectedBy: opts.killed ? 'fault record (kill)' : 'recovery found open work and no actor/released', epoch: this.epoch - 1, lastSeq });
    }
    this.push('actor/rehydrated', { snapshotSeq: 0, tailEvents: lastSeq });
    this.push('recovery/started', { fromSeq: this.events.length - 1, reason: 'the previous incarnation stopped with a turn open' });
    return this;
  }

  /** `recovery/continuation`, in the open turn as the runtime stamps it. */
  continuation(...closed: string[]): this {
    this.push('recovery/continuation', { closed, resume: this.turn ? 'step' : 'none' }, { turn: this.turn });
    return this;
  }
}

/** An event as plain JSON, for a test to change before it is parsed again. */
export type RawEvent = Record<string, unknown> & { seq: number; type: string; data: Record<string, unknown> };

/**
 * Returns a changed copy of a log: `change` edits the events as plain JSON; then seqs are
 * renumbered from 1 (unless `renumber` is false) and every event is parsed again.
 */
export function mutate(events: ActorEvent[], change: (raw: RawEvent[]) => void, renumber = true): ActorEvent[] {
  const raw = structuredClone(events) as unknown as RawEvent[];
  change(raw);
  return raw.map((e, i) => parseEvent(renumber ? { ...e, seq: i + 1 } : e));
}

/** Index of the `nth` (from 1) event of `type`; throws when there is none, so a test can't miss. */
export function indexOf(raw: ReadonlyArray<{ type: string }>, type: string, nth = 1): number {
  let seen = 0;
  const i = raw.findIndex((e) => e.type === type && ++seen === nth);
  if (i < 0) throw new Error(`no ${type} #${nth} in the log`);
  return i;
}
