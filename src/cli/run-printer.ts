import type { LiveDelta } from '../client/live.js';
import { addCost } from '../protocol/history.js';
import type { ActorEvent, EventData } from '../protocol/events.js';
import { noteEpochs } from '../store/incarnations.js';
import type { Projection } from '../store/projection.js';
import { answeredText, costText, eventLine, killedText, tokenText } from '../client/event-text.js';
import type { Out } from './output.js';
import { StatusScreen, type HoldReason } from './status-screen.js';
import { StreamedText } from './streamed-text.js';
import { terminalText } from '../client/terminal-text.js';
import { callSummary, clip, resultBrief } from '../client/tool-summary.js';

/** Kinds of message a person types into a run (`actorloop send`, a line typed during `run`). */
const PERSON_TEXT_KINDS: ReadonlySet<string> = new Set(['steer', 'inject', 'follow_up']);

/**
 * Shows a run as it goes, in one of four shapes:
 *
 * - a terminal: the model's text streamed from the live deltas (squared with the log, see
 *   `StreamedText`), each tool call as `▸ read_file src/slug.js` and its result in brief, approvals,
 *   questions and notes inline, and one status line at the bottom (step, what runs, tokens, cost,
 *   elapsed) whose elapsed time stops while a person decides or types;
 * - no terminal: one line per event that matters (a tool call with its result, a step's end,
 *   approvals and questions, an attempt that failed), no escape sequences;
 * - `--quiet`: nothing (the turn's end prints the answer);
 * - `--json`: every event as NDJSON and nothing else.
 *
 * Notes about the run rather than its result (the previous incarnation killed, a recovery, a
 * person's messages) go to stderr.
 */
export class RunPrinter {
  private step = 0;
  private tool: string | null = null;
  private waitingModel = false;
  private tokens = 0;
  /** USD so far; null: a model with no known price; undefined: no attempt ended yet. */
  private cost: number | null | undefined = undefined;
  /** The last model text shown as a step's final answer (the turn's end does not print it again). */
  private shownAnswer: string | null = null;
  /** The call whose line was printed last, so its result follows without naming it again. */
  private lastCall: string | null = null;
  /** Each call's one-line summary, by call ID, for results that do not follow their call. */
  private readonly calls = new Map<string, string>();
  private readonly epochs: number[] = [];
  /** Kinds of the steer / inject / follow-up messages received, by ID: their later states name them. */
  private readonly messages = new Map<string, string>();
  private readonly streams: StreamedText;
  private readonly screen: StatusScreen;
  private readonly tty: boolean;
  private readonly quiet: boolean;

  constructor(private readonly out: Out, private readonly json: boolean) {
    this.tty = out.stdout.isTTY === true;
    this.quiet = out.quiet === true;
    this.screen = new StatusScreen(out, this.tty && !json && !this.quiet, (elapsed) => this.statusText(elapsed));
    this.streams = new StreamedText({
      text: (chunk) => this.screen.text(chunk),
      endText: () => this.screen.endText(),
      note: (line) => this.screen.block(`  ${line}`),
    });
  }

  /** True when the model's text is streamed here from live deltas: a terminal, not `--json` or `--quiet`. */
  get wantsLive(): boolean {
    return this.tty && !this.json && !this.quiet;
  }

  /**
   * Starts from the agent's state as the log has it: its open step, the open turn's tokens and
   * cost, its incarnations, and an attempt already streaming (its stream is joined mid-way).
   */
  seedFrom(p: Projection): void {
    this.step = p.openStep?.index ?? p.openTurn?.steps ?? 0;
    const u = p.openTurn?.usage;
    this.tokens = u ? u.inputTokens + u.outputTokens : 0;
    this.cost = p.openTurn && p.openTurn.steps > 0 ? p.openTurn.costUsd : undefined;
    this.epochs.splice(0, this.epochs.length, ...(p.epochs ?? []));
    if (p.openAttempt) this.streams.joinedMidStream();
    // calls of the open step made before this follower came (an approval answered by a later
    // command): their results are printed under their names
    for (const c of p.pending.calls) this.calls.set(c.callId, callSummary(c.name, c.arguments));
  }

  /** Handles one commit. */
  commit(events: ActorEvent[]): void {
    for (const e of events) {
      if (this.json) {
        this.out.stdout.write(eventLine(e));
        continue;
      }
      this.track(e);
    }
  }

  /** One live model delta (only when `wantsLive`). */
  delta(d: LiveDelta): void {
    if (!this.wantsLive) return;
    this.streams.delta(d);
    this.tick();
  }

  /** True when the turn's answer is on the screen already, streamed or printed with its step. */
  answerShown(answer: string): boolean {
    return this.shownAnswer !== null && this.shownAnswer === answer;
  }

  /**
   * Children a wait saw end other than completed, by the call that waited: its result is `ok`
   * (the wait worked), so the line says which child failed, or a person reads success.
   */
  private readonly childEnds = new Map<string, string[]>();

  /** A result's head, with the children its wait saw fail. */
  private resultHead(e: Extract<ActorEvent, { type: 'tool/result' }>): string {
    const ended = e.call ? this.childEnds.get(e.call) : undefined;
    if (e.call) this.childEnds.delete(e.call);
    return `${resultBrief(e.data).head}${ended?.length ? ` · ${ended.join(', ')}` : ''}`;
  }

  private track(e: ActorEvent): void {
    noteEpochs(this.epochs, e);
    this.count(e);
    if (!this.quiet) {
      if (this.tty) this.onTerminal(e);
      else this.asLines(e);
      this.notes(e);
    }
    this.tick();
  }

  /** What the status line counts. */
  private count(e: ActorEvent): void {
    switch (e.type) {
      case 'turn/start':
        this.tokens = 0;
        this.cost = undefined;
        break;
      case 'step/start':
        this.step = e.data.index;
        this.tool = null;
        this.screen.gap();
        this.calls.clear();
        this.lastCall = null;
        break;
      case 'attempt/start':
        this.waitingModel = true;
        break;
      case 'attempt/end':
        this.waitingModel = false;
        this.tokens += e.data.usage.inputTokens + e.data.usage.outputTokens;
        this.cost = addCost(this.cost ?? 0, e.data.costUsd ?? null);
        break;
      case 'tool/start':
        this.tool = e.data.name;
        break;
      case 'subagent/completed':
        if (e.call && e.data.outcome !== null && e.data.outcome !== 'completed') {
          this.childEnds.set(e.call, [...(this.childEnds.get(e.call) ?? []), `${e.data.childId} ${e.data.outcome}`]);
        }
        break;
      case 'tool/result':
      case 'tool/cancelled':
      case 'tool/outcome_unknown':
      case 'tool/denied':
        this.tool = null;
        break;
      default:
        break;
    }
  }

  /** The terminal's shape: text, `▸` calls with their results, approvals inline. */
  private onTerminal(e: ActorEvent): void {
    switch (e.type) {
      case 'attempt/start':
        this.streams.attemptStarted();
        break;
      case 'attempt/end':
        // a failure that streamed text is said with it; one that did not, on a line of its own
        if (!this.streams.attemptEnded(e.data.outcome, failureWhy(e.data)) && e.data.outcome !== 'succeeded') {
          this.block(`  attempt ${e.data.outcome}${failureWhy(e.data)}`);
        }
        break;
      case 'assistant/accepted': {
        const final = e.data.toolCalls.length === 0;
        const shown = this.streams.accepted(e.data.content, final);
        if (final) this.shownAnswer = shown;
        break;
      }
      case 'assistant/rejected':
        this.streams.refused(clip(e.data.reason, 100));
        break;
      case 'completion/rejected':
        this.streams.refused(`not complete (${e.data.policy}): ${clip(e.data.missing.join('; '), 100)}`);
        break;
      case 'tool/call': {
        const summary = callSummary(e.data.name, e.data.arguments);
        if (e.call) this.calls.set(e.call, summary);
        const status = e.data.status === 'valid' ? '' : ` → ${e.data.status.replace('_', ' ')}`;
        this.block(`▸ ${summary}${status}`);
        this.lastCall = e.call ?? null;
        break;
      }
      case 'tool/result': {
        const brief = resultBrief(e.data);
        const lines = [`  └ ${this.whose(e)}${this.resultHead(e)}`, ...brief.lines.map((l) => `    ${l}`)];
        if (brief.more > 0) lines.push(`    … ${brief.more} more line${brief.more === 1 ? '' : 's'}`);
        this.block(...lines);
        break;
      }
      case 'tool/denied':
      case 'tool/cancelled':
      case 'tool/outcome_unknown':
        this.block(`  └ ${this.whose(e)}${ENDED[e.type]}: ${clip(e.data.reason, 100)}`);
        break;
      case 'approval/requested':
        this.block(`  ? ${this.whose(e)}needs approval ${e.data.approvalId}${e.data.reason ? ` (${clip(e.data.reason, 80)})` : ''}`);
        break;
      case 'approval/granted':
      case 'approval/denied':
      case 'ask/asked':
      case 'ask/answered':
        this.block(`  ${personText(e)}`);
        break;
      case 'step/end':
        if (e.data.outcome === 'failed' || e.data.outcome === 'stopped') {
          this.block(`step ${this.step} ${e.data.outcome}${e.data.reason ? ` (${clip(e.data.reason, 100)})` : ''}`);
        }
        break;
      default:
        break;
    }
  }

  /** No terminal: one line per event that matters, each naming its step and tools. */
  private asLines(e: ActorEvent): void {
    const at = `step ${this.step} ·`;
    switch (e.type) {
      case 'attempt/end':
        if (e.data.outcome !== 'succeeded') this.line(`${at} attempt ${e.data.outcome}${failureWhy(e.data)}`);
        break;
      case 'assistant/accepted':
        // a final answer is printed whole at the turn's end
        if (e.data.toolCalls.length > 0 && e.data.content) this.line(`${at} model: ${clip(e.data.content, 200)}`);
        break;
      case 'assistant/rejected':
        this.line(`${at} answer refused: ${clip(e.data.reason, 100)}`);
        break;
      case 'completion/rejected':
        this.line(`${at} answer not complete (${e.data.policy}): ${clip(e.data.missing.join('; '), 100)}`);
        break;
      case 'tool/call':
        if (e.call) this.calls.set(e.call, callSummary(e.data.name, e.data.arguments));
        break;
      case 'tool/result':
        this.line(`${at} ▸ ${this.callOf(e)} → ${this.resultHead(e)}`);
        break;
      case 'tool/denied':
      case 'tool/cancelled':
      case 'tool/outcome_unknown':
        this.line(`${at} ▸ ${this.callOf(e)} → ${ENDED[e.type]}: ${clip(e.data.reason, 100)}`);
        break;
      case 'approval/requested':
        this.line(`${at} ▸ ${this.callOf(e)} needs approval ${e.data.approvalId}`);
        break;
      case 'approval/granted':
      case 'approval/denied':
      case 'ask/asked':
      case 'ask/answered':
        this.line(personText(e));
        break;
      case 'step/end': {
        const d = e.data;
        const names = [...new Set([...this.calls.values()].map((s) => s.split(' ')[0]))];
        const calls = d.toolCalls ? ` · ${d.toolCalls} tool call${d.toolCalls === 1 ? '' : 's'} (${names.join(', ')})` : '';
        this.line(`step ${this.step}: ${d.outcome}${d.reason ? ` (${clip(d.reason, 100)})` : ''}${calls}${d.usage ? ` · ${tokenText(d.usage)}` : ''}`);
        break;
      }
      default:
        break;
    }
  }

  /** Notes on stderr, in both shapes: how the previous incarnation ended, a person's messages. */
  private notes(e: ActorEvent): void {
    switch (e.type) {
      // How the previous incarnation ended is a note, not a result: stderr, where a command's
      // errors go too, so stdout holds only the run's own lines (or NDJSON) and never leads with it.
      case 'actor/killed':
        this.line(`killed: ${killedText(e.data, this.epochs)}`, this.out.stderr);
        break;
      case 'recovery/continuation':
        // nothing closed is not nothing open: a wait for an approval or a question goes on as it was
        this.line(`recovered: ${e.data.closed.join('; ') || (e.data.resume === 'none' ? 'nothing was open' : `nothing had to be closed; the open ${e.data.resume} goes on`)}`, this.out.stderr);
        break;
      case 'interrupt/requested':
        this.line(`interrupt requested by ${e.data.by} · follow-ups ${e.data.followUps === 'keep' ? 'kept' : 'cancelled'}`, this.out.stderr);
        break;
      // A goal's life, in both shapes: the run follows it over its turns, so each is said as it happens.
      case 'goal/created':
        this.line(`goal ${e.data.goalId}: ${clip(e.data.objective, 120)}`);
        break;
      case 'goal/updated':
        this.line(`goal revision ${e.data.revision}: ${e.data.requested === 'complete' ? 'completion requested' : e.data.phase}${e.data.reason ? ` (${clip(e.data.reason, 100)})` : ''} · by ${e.data.by}`);
        break;
      case 'turn/end':
        // the last turn's answer is printed at the end; one the goal goes on from is said here
        if (e.data.goalContinues === true) {
          this.line(`turn ${e.data.outcome}${e.data.answer ? `: ${clip(e.data.answer, 200)}` : ''} · the goal goes on in a new turn`);
        }
        break;
      // A person's messages to the turn, as their delivery states are committed.
      case 'inbox/received':
        if (!PERSON_TEXT_KINDS.has(e.data.kind)) break;
        this.messages.set(e.data.messageId, e.data.kind);
        this.note(e.data.messageId, 'pending');
        break;
      case 'request/prepared':
        // only what was said to a running turn: a task's own message is the turn it starts
        for (const id of e.data.messageIds ?? []) if (this.messages.has(id)) this.note(id, `included in step ${this.step}`);
        break;
      case 'inbox/cancelled':
        if (this.messages.has(e.data.messageId) || PERSON_TEXT_KINDS.has(e.data.kind ?? '')) {
          this.note(e.data.messageId, `cancelled (${clip(e.data.reason, 60)})`, e.data.kind);
        }
        break;
      default:
        break;
    }
  }

  /** `read_file src/slug.js: ` before a result that does not follow its own call line. */
  private whose(e: ActorEvent): string {
    if (!e.call || e.call === this.lastCall) return '';
    this.lastCall = e.call;
    const summary = this.calls.get(e.call);
    return summary ? `${summary}: ` : '';
  }

  private callOf(e: ActorEvent): string {
    return (e.call && this.calls.get(e.call)) ?? 'tool';
  }

  /** `› steer msg_… pending`: one delivery state of a message. */
  private note(messageId: string, what: string, kind?: string): void {
    const k = this.messages.get(messageId) ?? kind ?? 'message';
    this.line(`› ${k === 'follow_up' ? 'follow-up' : k} ${messageId} ${what}`, this.out.stderr);
  }

  /**
   * While a person types a line on the terminal (`typing`) or answers a prompt (`person`), the
   * status line is taken away and what the run prints waits, so neither the person's line nor the
   * prompt is overwritten; the elapsed time stops too (the run is not what takes it). Released,
   * what waited is printed and the status line drawn again.
   */
  holdProgress(held: boolean, why: HoldReason = 'typing'): void {
    this.screen.hold(held, why);
  }

  /** The run's time so far, less the time a person held it. */
  elapsedMs(): number {
    return this.screen.elapsedMs();
  }

  /** Ends the live status line, if one is drawn, leaving it on the screen (before a prompt, at the turn's end). */
  endLine(): void {
    this.screen.endLine();
  }

  private block(...lines: string[]): void {
    this.screen.block(...lines);
  }

  private line(text: string, to: NodeJS.WritableStream = this.out.stdout): void {
    this.screen.line(text, to);
  }

  private tick(): void {
    this.screen.tick();
  }

  /** `step 3 · running read_file · 1,234 tokens · $0.0042 · 2.1s` */
  private statusText(elapsed: string): string {
    // the tool name is quoted: a model chose it
    const doing = this.tool ? ` · running ${terminalText(this.tool)}` : this.waitingModel ? ' · model' : '';
    const cost = this.cost === undefined ? '' : ` · ${costText(this.cost)}`;
    return `step ${this.step}${doing} · ${this.tokens.toLocaleString('en-US')} tokens${cost} · ${elapsed}s`;
  }
}

const ENDED = { 'tool/denied': 'denied', 'tool/cancelled': 'cancelled', 'tool/outcome_unknown': 'outcome unknown' } as const;

/** ` (server: …) · retry in 500 ms`: why an attempt failed and what comes next. */
function failureWhy(d: EventData<'attempt/end'>): string {
  const error = d.error ? ` (${d.error.class}: ${clip(d.error.message, 80)})` : '';
  return `${error}${d.backoffMs !== null ? ` · retry in ${d.backoffMs} ms` : ''}`;
}

/** Approvals and questions, as a person's part of the run. */
function personText(e: Extract<ActorEvent, { type: 'approval/granted' | 'approval/denied' | 'ask/asked' | 'ask/answered' }>): string {
  switch (e.type) {
    case 'approval/granted':
      return `approval ${e.data.approvalId} granted by ${e.data.by}${e.data.always ? ' (always)' : ''}`;
    case 'approval/denied':
      return `approval ${e.data.approvalId} denied by ${e.data.by}${e.data.reason ? ` (${clip(e.data.reason, 80)})` : ''}`;
    case 'ask/asked':
      return `asked question ${e.data.questionId}: ${clip(e.data.question)}${e.data.sensitive ? ' (sensitive)' : ''}`;
    case 'ask/answered':
      return `question ${e.data.questionId} ${answeredText(e.data)}`;
  }
}
