import type { Logger } from 'pino';
import type { Inbox, InboxDelivery, InboxPort } from '../../bus/inbox-port.js';
import type { InboxChannel } from '../../bus/subjects.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import type { AgentActor } from '../actor/agent-actor.js';
import { ActorDropped } from '../faults/faults.js';

/** A hosted agent and the state of its inbox reader. */
export interface Hosted {
  actor: AgentActor;
  /**
   * Its inbox's durable consumer made sure of (or being made): a new agent's is made beside its
   * first turn, since its mail is handed to it in-process; null after a failed attempt.
   */
  consumer: Promise<void> | null;
  /** Open only while a drain runs: a parked actor keeps no consumer handle. */
  inbox: Inbox | null;
  /**
   * The last take of a message (a drain's delivery, or mail handed over in-process) until its
   * receipt is committed: takes run one after another, in the order they came.
   */
  takes: Promise<void>;
  /** Mail accepted and left to the drain (not handed over): mail after it waits for the drain too, so none overtakes it. */
  leftToDrain: Set<string> | null;
  /** A drain is running; `again` asks it to look once more when it ends. */
  draining: boolean;
  again: boolean;
  /** A look scheduled for redeliveries (nak, lost ack). */
  retry: NodeJS.Timeout | null;
}

/** Inbox drains running at once on one host. */
const MAX_CONCURRENT_DRAINS = 16;

/** How long to wait before looking again for a message delivered but not acked. */
const REDELIVERY_CHECK_MS = 1_500;

/** What the drains take of their supervisor. */
export interface DrainDeps {
  inbox: InboxPort;
  logger: Logger;
  stopped(): boolean;
  /** Makes sure of the agent's durable consumer, once. */
  ensureConsumer(h: Hosted): Promise<void>;
  /** Takes a message into its agent's log, in order; resolves once its receipt is committed. */
  take(h: Hosted, msg: InboxMessage, channel: InboxChannel): Promise<void>;
  /** Erases a received message holding a secret from the inbox's store. */
  erase(actorId: string, delivery: InboxDelivery): Promise<void>;
  /** Looks at an agent's inbox again. */
  wake(actorId: string): void;
}

/**
 * The inbox reads of a supervisor's agents (design §6): each agent's durable consumer is pulled
 * only when its mail signal says it has mail, until nothing waits; a delivery is taken into the
 * log before it is acked (a crash between redelivers it, and the message ID dedupes it), and a
 * message holding a secret is erased from the inbox's store before its ack.
 */
export class InboxDrains {
  constructor(private readonly deps: DrainDeps) {}

  // Drains run a few at a time: a thousand actors woken at once would otherwise starve the event
  // loop, and their pulls' heartbeats would time out.
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  private async limited<T>(fn: () => Promise<T>): Promise<T> {
    if (this.running >= MAX_CONCURRENT_DRAINS) await new Promise<void>((r) => this.waiting.push(r));
    this.running += 1;
    try {
      return await fn();
    } finally {
      this.running -= 1;
      this.waiting.shift()?.();
    }
  }

  /** Reads one agent's inbox until nothing waits (at most MAX_CONCURRENT_DRAINS at once). */
  run(h: Hosted): Promise<void> {
    return this.limited(() => this.drain(h));
  }

  private async drain(h: Hosted): Promise<void> {
    const { actor } = h;
    // What the last taken delivery said is left, when nothing delivered before it was left unacked
    // (neither before this drain nor by its pull): then the consumer's counts need not be asked for
    // again, a round trip per message. Mail published after that delivery wakes this actor again.
    let known: { undelivered: number; unacked: number } | null = null;
    while (!this.deps.stopped() && !actor.failed) {
      let delivery;
      let cleanBefore = false;
      try {
        await this.deps.ensureConsumer(h);
        const inbox = (h.inbox ??= await this.deps.inbox.open(actor.actorId, { logger: this.deps.logger }));
        const { undelivered, unacked } = known ?? (await inbox.counts());
        known = null;
        if (undelivered === 0 && unacked === 0) return;
        cleanBefore = unacked === 0;
        // Delivered and never acked (a crashed host, a lost ack, a failed take): it counts as unacked,
        // never as undelivered, comes again after its wait with no publish to wake us, and only to a
        // pull. So pull now, and if it is not due yet, look again later.
        delivery = await inbox.next({ expiresMs: 1_000 });
        if (!delivery && undelivered === 0) {
          this.lookAgain(h, REDELIVERY_CHECK_MS);
          return;
        }
      } catch (err) {
        if (this.deps.stopped()) return;
        // Under load a pull can miss its heartbeats; nothing is lost, the next look finds the message.
        this.deps.logger.debug({ err, actorId: actor.actorId }, 'inbox read failed; looking again shortly');
        this.lookAgain(h, 500);
        return;
      }
      if (!delivery) continue;
      if (this.deps.stopped()) return delivery.nak();
      let taken = false;
      try {
        await this.deps.take(h, delivery.message, delivery.channel);
        taken = true;
        this.drained(h, delivery.message.id);
        // Erased after its receipt is committed, before the ack: a crash before the erase
        // redelivers it, the receipt in the log says it must go, and this erases it then.
        if (actor.erasesFromInbox(delivery.message.id)) {
          actor.ports.faults.hit('before:inbox-erase', actor.actorId);
          await this.deps.erase(actor.actorId, delivery);
        }
        actor.ports.faults.hit('before:inbox-ack', actor.actorId);
        // a child's notice or report is in the parent's log, its ack not yet sent: it comes again and is deduped
        if (delivery.message.kind === 'subagent_completed' || delivery.message.kind === 'subagent_report' || delivery.message.kind === 'job_notice') {
          actor.ports.faults.hit('before:notice-ack', actor.actorId);
        }
        await delivery.ack();
        if (cleanBefore && delivery.settledBefore === 0) known = { undelivered: delivery.undeliveredAfter, unacked: 0 };
      } catch (err) {
        this.drained(h, delivery.message.id);
        if (err instanceof ActorDropped) actor.fail(err);
        // Taken: it is in the log, and its redelivery is acked and dropped. Not taken: it comes
        // again after its backoff, and after max_deliver becomes a dead letter (fail logs which).
        if (taken) delivery.nak();
        else await delivery.fail(err);
        if (actor.failed) return;
        this.lookAgain(h, REDELIVERY_CHECK_MS);
        return;
      }
    }
  }

  /** A delivery left to the drain was taken (or its take failed: its redelivery keeps no order anyway). */
  drained(h: Hosted, messageId: string): void {
    if (!h.leftToDrain?.delete(messageId)) return;
    if (h.leftToDrain.size === 0) h.leftToDrain = null;
  }

  private lookAgain(h: Hosted, delayMs: number): void {
    if (h.retry) return;
    h.retry = setTimeout(() => {
      h.retry = null;
      this.deps.wake(h.actor.actorId);
    }, delayMs);
    h.retry.unref?.();
  }
}
