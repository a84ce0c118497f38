import type { Out } from './output.js';
import { terminalText } from '../client/terminal-text.js';

/** Why the live status line waits: a person typing a steer line, or a person deciding at a prompt. */
export type HoldReason = 'typing' | 'person';

// the only escape sequences written here are our own: go to the line's start and clear it
const CLEAR_LINE = '\r\x1b[2K';

/**
 * A run's output with one status line kept at the bottom of a terminal: whatever is printed goes
 * above it (the line is cleared, the text written, the line drawn again), and the line's clock
 * redraws every 250 ms while the model thinks or a tool runs. While a person holds the terminal
 * (typing a line, answering a prompt) the status line is taken away, what is printed waits and is
 * written once they are done, and the clock leaves that time out. Without a terminal (`live`
 * false) lines are written as they come and no status line is drawn.
 */
export class StatusScreen {
  private ticker: NodeJS.Timeout | null = null;
  private lastStatus = '';
  private readonly started = Date.now();
  /** Time a person held the terminal: not counted as the run's. */
  private heldMs = 0;
  private heldSince: number | null = null;
  private readonly holds = new Set<HoldReason>();
  /** Writes made while held, written once released (a person's line or prompt stays intact). */
  private queued: Array<[NodeJS.WritableStream, string]> = [];
  /** The status line is drawn on the terminal's last line (the cursor at its end). */
  private statusShown = false;
  /** Streamed text has a line open (the cursor mid-line): no status line under it now. */
  private textOpen = false;
  /** Set by `gap`: the next thing printed on stdout is set apart by a blank line. */
  private gapDue = false;
  private printedAny = false;

  /** `status(elapsed)`: the status line's text for an elapsed time in seconds, e.g. `1.2`. */
  constructor(private readonly out: Out, private readonly live: boolean, private readonly status: (elapsed: string) => string) {}

  /** A new part begins (a step): a blank line before its first output, if anything came before. */
  gap(): void {
    this.gapDue = this.printedAny;
  }

  /** Lines after streamed text (which is ended first); what they quote has its control characters shown, a newline too. */
  block(...lines: string[]): void {
    this.endText();
    this.spaceOut();
    for (const l of lines) this.line(l);
  }

  /** One line to stdout or stderr, control characters shown. */
  line(text: string, to: NodeJS.WritableStream = this.out.stdout): void {
    if (to === this.out.stdout) this.printedAny = true;
    this.write(to, `${terminalText(text)}\n`);
  }

  /** A piece of streamed text, as it comes (its line breaks kept, other control characters shown). */
  text(chunk: string): void {
    if (!this.textOpen) this.spaceOut();
    this.printedAny = true;
    const text = terminalText(chunk, 'block');
    this.write(this.out.stdout, text);
    this.textOpen = !text.endsWith('\n');
  }

  /** Ends the streamed text's open line, if any. */
  endText(): void {
    if (!this.textOpen) return;
    this.write(this.out.stdout, '\n');
    this.textOpen = false;
  }

  /** Holds the terminal for a person (or releases it): see the class comment. */
  hold(held: boolean, why: HoldReason): void {
    const was = this.holds.size > 0;
    if (held) this.holds.add(why);
    else this.holds.delete(why);
    const now = this.holds.size > 0;
    if (now && !was) {
      this.heldSince = Date.now();
      // the person's line starts at the line's start, not after half a sentence
      if (this.textOpen) this.out.stdout.write('\n');
      this.textOpen = false;
      this.clearStatus();
    } else if (!now && was) {
      if (this.heldSince !== null) this.heldMs += Date.now() - this.heldSince;
      this.heldSince = null;
      const queued = this.queued;
      this.queued = [];
      for (const [to, text] of queued) to.write(text);
      this.tick();
    }
  }

  /** The run's time so far, less the time a person held the terminal. */
  elapsedMs(): number {
    const now = Date.now();
    return now - this.started - this.heldMs - (this.heldSince === null ? 0 : now - this.heldSince);
  }

  /** Draws the status line now, and keeps its clock moving until `endLine`. */
  tick(): void {
    if (!this.live) return;
    this.drawStatus();
    this.ticker ??= setInterval(() => this.drawStatus(), 250);
    this.ticker.unref?.();
  }

  /**
   * Ends the status line, if one is drawn, leaving it on the screen as it was (before a prompt,
   * at the turn's end), and stops its redraws until the next `tick`.
   */
  endLine(): void {
    if (this.ticker) clearInterval(this.ticker);
    this.ticker = null;
    if (this.textOpen) {
      this.out.stdout.write('\n');
      this.textOpen = false;
    }
    if (this.statusShown) this.out.stdout.write('\n');
    this.statusShown = false;
  }

  private spaceOut(): void {
    if (!this.gapDue) return;
    this.gapDue = false;
    this.write(this.out.stdout, '\n');
  }

  /** Writes above the status line (taken away first, drawn again by `tick`), or queues while held. */
  private write(to: NodeJS.WritableStream, text: string): void {
    if (this.holds.size > 0) {
      this.queued.push([to, text]);
      return;
    }
    this.clearStatus();
    to.write(text);
  }

  private clearStatus(): void {
    if (!this.statusShown) return;
    this.out.stdout.write(CLEAR_LINE);
    this.statusShown = false;
  }

  private drawStatus(): void {
    if (this.holds.size > 0 || this.textOpen) return;
    const status = this.status((this.elapsedMs() / 1000).toFixed(1));
    // redrawn on every event: the same line again is not written again
    if (this.statusShown && status === this.lastStatus) return;
    this.out.stdout.write(`${CLEAR_LINE}${status}`);
    this.lastStatus = status;
    this.statusShown = true;
  }
}
