import { emitKeypressEvents } from 'node:readline';
import { createInterface, type Interface } from 'node:readline/promises';
import { ActorloopError } from '../protocol/errors.js';
import type { Out } from './output.js';
import type { RunPrinter } from './run-printer.js';
import { sendAsPerson } from './person-messages.js';
import { textMessage } from '../client/messages.js';
import type { Runtime } from './runtime.js';
import { terminalText } from '../client/terminal-text.js';

/** What `SteerLines` reads from and reports to. */
export interface SteerLinesOptions {
  /** The person's terminal (raw mode is set while lines are read, and restored on pause). */
  input: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (raw: boolean) => unknown };
  /** Where the typed line is echoed (the terminal's stderr: stdout belongs to the run's output). */
  output: NodeJS.WritableStream;
  /** A line the person typed and ended with Enter, trimmed; never empty. */
  onLine(text: string): void;
  /** Ctrl-C: in raw mode the terminal sends no SIGINT, so the key is reported here. */
  onInterrupt(): void;
  /** True when the person starts typing a line, false once it is sent or dropped (the live progress line waits meanwhile). */
  onTyping?(typing: boolean): void;
}

/**
 * Reads lines a person types on the terminal while a turn runs, with line editing and history
 * (readline in terminal mode). It owns the terminal only while started: `pause` hands it back
 * (cooked mode, input paused) so a prompt of its own (an approval) is the only reader, and
 * `start` takes it again. Only for a TTY: a piped stdin (tests, scripts) is never read.
 */
export class SteerLines {
  private rl: Interface | null = null;
  private typing = false;
  private stopped = false;
  private readonly onKey = (str: string | undefined, key: { ctrl?: boolean; meta?: boolean; name?: string } | undefined): void => {
    // runs before readline's own listener (added first): the key is not in `rl.line` yet
    if (this.typing || !this.rl || key?.ctrl || key?.meta || key?.name === 'return' || key?.name === 'enter') return;
    if (str && /^[^\x00-\x1f\x7f]+$/.test(str)) this.setTyping(true);
  };

  constructor(private readonly o: SteerLinesOptions) {}

  /** True while lines are being read. */
  get reading(): boolean {
    return this.rl !== null;
  }

  /** Starts (or starts again) reading lines; does nothing once stopped. */
  start(): void {
    if (this.rl || this.stopped) return;
    emitKeypressEvents(this.o.input);
    this.o.input.on('keypress', this.onKey);
    const rl = createInterface({ input: this.o.input, output: this.o.output, terminal: true, prompt: '' });
    rl.on('line', (line: string) => {
      this.setTyping(false);
      const text = line.trim();
      if (text !== '') this.o.onLine(text);
    });
    rl.on('SIGINT', () => {
      // what was typed is dropped with the Ctrl-C, as a shell drops it
      rl.write(null, { ctrl: true, name: 'u' });
      this.setTyping(false);
      this.o.onInterrupt();
    });
    // Ctrl-D on an empty line: the person is done typing; Ctrl-C still comes as a signal
    rl.on('close', () => {
      if (this.rl === rl) this.detach();
    });
    this.rl = rl;
  }

  /** Stops reading until `start`: the terminal is back in cooked mode, for a prompt or the turn's end. */
  pause(): void {
    const rl = this.rl;
    if (!rl) return;
    this.detach();
    rl.close();
  }

  /** Stops reading for good. */
  stop(): void {
    this.stopped = true;
    this.pause();
  }

  private detach(): void {
    this.rl = null;
    this.o.input.off('keypress', this.onKey);
    this.setTyping(false);
  }

  private setTyping(typing: boolean): void {
    if (this.typing === typing) return;
    this.typing = typing;
    this.o.onTyping?.(typing);
  }
}

/** What `steersFromTerminal` needs: the agent, the bus to send on, and the terminal. */
export interface TerminalSteersOptions {
  agentId: string;
  rt: Pick<Runtime, 'bus'>;
  out: Out;
  printer: Pick<RunPrinter, 'holdProgress' | 'endLine'>;
  /** Ctrl-C while lines are read (the follower's `InterruptKey`). */
  onInterrupt(): void;
}

/**
 * Lines typed on the terminal while a turn is followed, each sent to the agent as a steer on the
 * person channel. Nothing is printed on success: the log's `inbox/received` shows it pending and
 * its `request/prepared` shows it included (RunPrinter). Null without a person at a terminal.
 */
export function steersFromTerminal(o: TerminalSteersOptions): SteerLines | null {
  const { out } = o;
  if (!out.stdin?.isTTY || !out.stderr.isTTY) return null;
  return new SteerLines({
    input: out.stdin,
    output: out.stderr,
    onInterrupt: o.onInterrupt,
    onTyping: (typing) => o.printer.holdProgress(typing),
    onLine: (text) => {
      const msg = textMessage(o.agentId, 'steer', text);
      sendAsPerson(o.rt, msg).catch((err: unknown) => {
        o.printer.endLine();
        const why = err instanceof ActorloopError ? err.userMessage() : (err as Error).message;
        out.stderr.write(`› steer not sent: ${terminalText(why)}\n`);
      });
    },
  });
}
