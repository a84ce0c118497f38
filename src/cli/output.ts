import type { ActorEvent } from '../protocol/events.js';
import { terminalText } from './terminal-text.js';

/** Where command output goes; stdout carries results and `--json` NDJSON, stderr the rest. */
export interface Out {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  /** Where a person answers prompts (approvals); absent or not a TTY: nobody to ask. */
  stdin?: NodeJS.ReadableStream & { isTTY?: boolean };
}

/** One event as one NDJSON line. */
export function eventLine(e: ActorEvent): string {
  return `${JSON.stringify(e)}\n`;
}

function clip(text: string, max = 80): string {
  const one = text.replace(/\s+/g, ' ').trim();
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}

/** What an `actor/killed` says, in words: which incarnation, where its log stopped, what killed it. */
function killedText(d: Extract<ActorEvent, { type: 'actor/killed' }>['data']): string {
  return `epoch ${d.epoch} died after seq ${d.lastSeq} · ${d.point === null ? 'point not known' : `at ${d.point}`} · ${d.detectedBy}`;
}

/** How a question ended, in words; a sensitive answer shows as `[sensitive]` (the log holds nothing else). */
function answeredText(d: Extract<ActorEvent, { type: 'ask/answered' }>['data']): string {
  if (d.outcome !== 'answered') return d.outcome;
  return `answered · ${d.optionId !== null ? `option ${d.optionId}` : clip(d.answer, 60)}`;
}

/**
 * A one-line, human summary of an event, for `events` and non-TTY progress. The data it quotes
 * (file contents, model output, arguments) has its control characters shown, not sent.
 */
export function describeEvent(e: ActorEvent): string {
  return terminalText(summarize(e));
}

function summarize(e: ActorEvent): string {
  const head = `${String(e.seq).padStart(5)}  ${e.at.slice(11, 23)}  ${e.type.padEnd(22)}`;
  switch (e.type) {
    case 'turn/start':
      return `${head} ${e.data.source} · model ${e.data.settings.model}`;
    case 'user/message':
      return `${head} ${clip(e.data.content)}`;
    case 'step/start':
      return `${head} step ${e.data.index}`;
    case 'attempt/end':
      return `${head} ${e.data.outcome}${e.data.error ? ` (${e.data.error.class}: ${clip(e.data.error.message, 60)})` : ''} · ${e.data.usage.inputTokens}+${e.data.usage.outputTokens} tok`;
    case 'assistant/accepted':
      return `${head} ${e.data.toolCalls.length > 0 ? e.data.toolCalls.map((c) => c.name).join(', ') : clip(e.data.content ?? '')}`;
    case 'tool/call':
      return `${head} ${e.data.name} ${clip(e.data.arguments, 60)}${e.data.status === 'valid' ? '' : ` → ${e.data.status}`}`;
    case 'tool/start':
      return `${head} ${e.data.name}${e.data.rerun ? ' (run again)' : ''}`;
    case 'tool/result':
      return `${head} ${e.data.ok ? 'ok' : 'error'} · ${clip(e.data.output, 60)}`;
    case 'step/end':
      return `${head} ${e.data.outcome}${e.data.reason ? ` (${e.data.reason})` : ''}`;
    case 'turn/end':
      return `${head} ${e.data.outcome}${e.data.reason ? ` (${e.data.reason})` : ''} · ${e.data.steps} steps · ${e.data.toolCalls} tool calls`;
    case 'recovery/continuation':
      return `${head} closed: ${e.data.closed.join('; ') || 'nothing'} · resume ${e.data.resume}`;
    case 'tool/reconciled':
      return `${head} ${e.data.verdict.replace('_', ' ')}${e.data.reason ? ` (${clip(e.data.reason, 60)})` : ''}`;
    case 'plan/replaced':
      return `${head} version ${e.data.version} · ${e.data.items.filter((i) => i.status === 'completed').length}/${e.data.items.length} done`;
    case 'actor/killed':
      return `${head} ${killedText(e.data)}`;
    case 'actor/released':
      return `${head} ${clip(e.data.reason)}`;
    // the kind and ID only: a message's content may be an answer a person marked sensitive
    case 'inbox/received':
      return `${head} ${e.data.kind} ${e.data.messageId} from ${e.data.from}`;
    case 'inbox/cancelled':
      return `${head} ${e.data.messageId} (${clip(e.data.reason, 60)})`;
    case 'interrupt/requested':
      return `${head} by ${e.data.by} · follow-ups ${e.data.followUps}`;
    case 'tool/outcome_unknown':
    case 'tool/cancelled':
    case 'tool/denied':
      return `${head} ${clip(e.data.reason)}`;
    case 'ask/asked':
      return `${head} ${e.data.questionId} ${clip(e.data.question, 60)}${e.data.options.length > 0 ? ` · options ${e.data.options.map((o) => o.id).join('|')}` : ''}${e.data.sensitive ? ' · sensitive' : ''}`;
    case 'ask/answered':
      return `${head} ${e.data.questionId} ${answeredText(e.data)}`;
    default:
      return head.trimEnd();
  }
}

/** Kinds of message a person types into a run (`actorloop send`, a line typed during `run`). */
const PERSON_TEXT_KINDS: ReadonlySet<string> = new Set(['steer', 'inject', 'follow_up']);

/**
 * Shows a run as it goes: on a TTY one live progress line per step (step, tool running, tokens,
 * elapsed), otherwise one line per step; `--json` prints every event as NDJSON and nothing else.
 */
export class RunPrinter {
  private step = 0;
  private tool: string | null = null;
  private waitingModel = false;
  private ticker: NodeJS.Timeout | null = null;
  private tokens = 0;
  private readonly started = Date.now();
  private lineOpen = false;
  private held = false;
  /** Kinds of the steer / inject / follow-up messages received, by ID: their later states name them. */
  private readonly messages = new Map<string, string>();

  constructor(private readonly out: Out, private readonly json: boolean) {}

  /** Starts from where a resumed agent is: its open step and the tokens it has used. */
  seed(step: number, tokens: number): void {
    this.step = step;
    this.tokens = tokens;
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

  private track(e: ActorEvent): void {
    const tty = this.out.stdout.isTTY === true;
    switch (e.type) {
      case 'step/start':
        this.step = e.data.index;
        this.tool = null;
        break;
      case 'attempt/start':
        this.waitingModel = true;
        break;
      case 'attempt/end':
        this.waitingModel = false;
        this.tokens += e.data.usage.inputTokens + e.data.usage.outputTokens;
        break;
      case 'tool/start':
        this.tool = e.data.name;
        break;
      case 'tool/result':
      case 'tool/cancelled':
      case 'tool/outcome_unknown':
        this.tool = null;
        break;
      case 'ask/asked':
        this.endLine();
        this.line(`asked question ${e.data.questionId}: ${clip(e.data.question)}${e.data.sensitive ? ' (sensitive)' : ''}`);
        break;
      case 'ask/answered':
        this.endLine();
        this.line(`question ${e.data.questionId} ${answeredText(e.data)}`);
        break;
      case 'step/end':
        if (!tty) this.line(`step ${this.step}: ${e.data.outcome}${e.data.reason ? ` (${e.data.reason})` : ''}${e.data.toolCalls ? ` · ${e.data.toolCalls} tool call(s)` : ''}`);
        break;
      // How the previous incarnation ended is a note, not a result: stderr, where a command's
      // errors go too, so stdout holds only the run's own lines (or NDJSON) and never leads with it.
      case 'actor/killed':
        this.endLine();
        this.line(`killed: ${killedText(e.data)}`, this.out.stderr);
        break;
      case 'recovery/continuation':
        this.endLine();
        this.line(`recovered: ${e.data.closed.join('; ') || 'nothing was open'}`, this.out.stderr);
        break;
      case 'interrupt/requested':
        this.endLine();
        this.line(`interrupt requested by ${e.data.by} · follow-ups ${e.data.followUps === 'keep' ? 'kept' : 'cancelled'}`, this.out.stderr);
        break;
      // A person's messages to the turn, as their delivery states are committed (notes: stderr).
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
    if (tty) {
      this.progress();
      // elapsed time moves while the model thinks or a tool runs, not only when something commits
      this.ticker ??= setInterval(() => this.progress(), 250);
      this.ticker.unref?.();
    }
  }

  /** `› steer msg_… pending`: one delivery state of a message. */
  private note(messageId: string, what: string, kind?: string): void {
    const k = this.messages.get(messageId) ?? kind ?? 'message';
    this.endLine();
    this.line(`› ${k === 'follow_up' ? 'follow-up' : k} ${messageId} ${what}`, this.out.stderr);
  }

  /**
   * While a person types a line on the terminal (held), the live progress line is ended and not
   * drawn again: its redraws would erase what they type. Drawn again once released.
   */
  holdProgress(held: boolean): void {
    this.held = held;
    if (held) this.endLine();
  }

  /** One line of progress text; what it quotes has its control characters shown, not sent. */
  private line(text: string, to: NodeJS.WritableStream = this.out.stdout): void {
    to.write(`${terminalText(text)}\n`);
  }

  private progress(): void {
    if (this.held) return;
    const elapsed = ((Date.now() - this.started) / 1000).toFixed(1);
    // the only escape sequence written here is our own (clear the line); the tool name is quoted
    const tool = this.tool ? ` · running ${terminalText(this.tool)}` : this.waitingModel ? ' · model' : '';
    this.out.stdout.write(`\r\x1b[2Kstep ${this.step}${tool} · ${this.tokens.toLocaleString('en-US')} tokens · ${elapsed}s`);
    this.lineOpen = true;
  }

  /** Ends the live progress line, if one is open. */
  endLine(): void {
    if (this.ticker) clearInterval(this.ticker);
    this.ticker = null;
    if (this.lineOpen) this.out.stdout.write('\n');
    this.lineOpen = false;
  }
}
