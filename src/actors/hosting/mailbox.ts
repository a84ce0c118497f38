import type { Logger } from 'pino';
import type { Inbox, InboxPort } from '../../bus/inbox-port.js';
import type { InboxChannel } from '../../bus/subjects.js';
import type { InboxMessage } from '../../protocol/inbox.js';

// The inbox of one background actor (a job, a workflow run): read when its mail signal says so,
// until nothing waits. Such mail is rare (a cancel, a node's notice) and each message is taken
// into the actor's log before it is acked, so a crash between redelivers it and the actor, which
// dedupes by the log, changes nothing the second time. A delivery left unacked (a failed take, a
// lost ack) comes again only to a pull after its backoff, with no signal: the mailbox looks again.

/** How long to wait before looking again for a message delivered but not acked. */
export const MAILBOX_RECHECK_MS = 1_500;

/** What a mailbox reads with, and where a message goes. */
export interface MailboxDeps {
  inbox: InboxPort;
  logger: Logger;
  /** The actor's ID, whose inbox this is. */
  id: string;
  /** False once the actor is no longer hosted here (or its host stops): nothing more is read. */
  live(): boolean;
  /** Takes a message into the actor's log; resolves once what it changed is committed. */
  receive(msg: InboxMessage, channel: InboxChannel): Promise<void>;
}

/** One background actor's inbox reader. */
export class Mailbox {
  private inbox: Inbox | null = null;
  private draining = false;
  private again = false;
  private retry: NodeJS.Timeout | null = null;
  private reading: Promise<void> = Promise.resolve();

  constructor(private readonly deps: MailboxDeps) {}

  /** Mail came (or may have): reads until nothing waits; a wake during a read makes it look once more. */
  wake(): void {
    if (!this.deps.live()) return;
    if (this.draining) {
      this.again = true;
      return;
    }
    this.draining = true;
    this.reading = this.drain().finally(() => {
      this.draining = false;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  /** Settles once no read is under way (one a wake during it asked for included). */
  async settled(): Promise<void> {
    while (this.draining) await this.reading;
  }

  /** Stops looking again. */
  close(): void {
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
  }

  private lookAgain(): void {
    if (this.retry || !this.deps.live()) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      this.wake();
    }, MAILBOX_RECHECK_MS);
    this.retry.unref?.();
  }

  private async drain(): Promise<void> {
    const { deps } = this;
    try {
      const inbox = (this.inbox ??= await deps.inbox.open(deps.id, { logger: deps.logger }));
      while (deps.live()) {
        const { undelivered, unacked } = await inbox.counts();
        if (undelivered === 0 && unacked === 0) return;
        const d = await inbox.next({ expiresMs: 1_000 });
        if (!d) {
          // delivered and not acked, not due yet: it comes to a later pull
          if (undelivered === 0) return this.lookAgain();
          continue;
        }
        try {
          await deps.receive(d.message, d.channel);
          await d.ack();
        } catch (err) {
          await d.fail(err);
          return this.lookAgain();
        }
      }
    } catch (err) {
      if (!deps.live()) return;
      deps.logger.debug({ err, actorId: deps.id }, 'inbox read failed; looking again shortly');
      this.lookAgain();
    }
  }
}
