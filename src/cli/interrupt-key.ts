import type { InboxMessage } from '../protocol/inbox.js';
import { interruptMessage } from '../client/messages.js';

/**
 * How long after a first Ctrl-C a second one leaves instead: the interrupt is sent when this has
 * passed, so a quick double Ctrl-C leaves the turn open for `actorloop resume`.
 */
export const LEAVE_WINDOW_MS = 1_000;

/** What a Ctrl-C does for `InterruptKey`. */
export interface InterruptKeyOptions {
  agentId: string;
  /** Delivers the interrupt to the agent's inbox (on the person channel). */
  send(msg: InboxMessage): Promise<void>;
  /** Says one line to the person (stderr). */
  say(line: string): void;
  /** The command that carries the turn on, as the person would paste it (`cliLine`: with the command's --data-dir and --nats). */
  resumeLine: string;
  windowMs?: number;
}

/**
 * Ctrl-C during a turn: the first asks to interrupt it (sent after a short window), a second
 * within that window leaves at once and sends nothing, so the turn stays open and resumable; a
 * second after the interrupt went out leaves at once too, and the interrupt is carried out where
 * the agent is hosted (by a later `resume` when it was this process).
 */
export class InterruptKey {
  /** Resolves when a second Ctrl-C asks to leave now. */
  readonly left: Promise<{ kind: 'leave'; sent: boolean }>;
  private leave!: (v: { kind: 'leave'; sent: boolean }) => void;
  private timer: NodeJS.Timeout | null = null;
  private presses = 0;
  private sent = false;

  constructor(private readonly o: InterruptKeyOptions) {
    this.left = new Promise((resolve) => (this.leave = resolve));
  }

  /** One Ctrl-C (a SIGINT, or Ctrl-C at a prompt). */
  press(): void {
    this.presses += 1;
    if (this.presses > 1) {
      this.clear();
      this.leave({ kind: 'leave', sent: this.sent });
      return;
    }
    this.o.say(`interrupting the turn (Ctrl-C again now leaves instead; the turn stays open and \`${this.o.resumeLine}\` carries it on)`);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.sent = true;
      this.o.send(interruptMessage(this.o.agentId)).catch((err: unknown) => {
        this.o.say(`the interrupt was not delivered: ${(err as Error).message}; Ctrl-C again leaves`);
      });
    }, this.o.windowMs ?? LEAVE_WINDOW_MS);
  }

  /** Stops a pending interrupt (the command is ending). */
  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
