import type { TurnEnded } from '../../actors/actor/hosted-agent.js';
import type { DirectoryEntry } from '../../bus/directory.js';
import type { ActorEvent } from '../../protocol/events.js';
import type { Projection } from '../../store/projection.js';
import { awaitingPerson, followTurnSteps, turnEndOf, type TurnEndEvent } from '../../client/turn-follower.js';
import { createNatsLiveSource } from '../../client/live.js';
import { InterruptKey } from '../interrupt-key.js';
import { EXIT } from '../exit-codes.js';
import { placementOf, type Placement } from '../hand-off.js';
import type { Runtime } from '../runtime.js';
import type { Prompt } from './approval-prompt.js';
import { ttyQuestionPrompt, type QuestionPrompt } from './question-prompt.js';
import { askPerson } from '../person-prompter.js';
import { personTransport } from '../person-messages.js';
import { printTurnEnd, printWaiting, type TurnOutput } from './turn-output.js';
import { terminalText } from '../../client/terminal-text.js';
import { exitCodeForSignal, whenStopped } from '../stop-signals.js';
import { steersFromTerminal } from '../steer-lines.js';
import { cliLine } from '../hints.js';
import { watchChildWaits } from '../child-waits.js';

/** How often the follower looks at who holds the agent: often until a host took it, then less. */
const HOLDER_POLL_FIRST_MS = 200;
const HOLDER_POLL_MS = 1_000;
/** How long the look before the turn's end may take: a slow bus must not hold the answer back. */
const LAST_LOOK_MS = 2_000;
/** How often the follower looks at the agent's holder and its turn's deadline (never at a wait: the log says that). */
const TICK_MS = 100;
/** With no event for this long, the follower says again what it waits for. */
const QUIET_NOTICE_MS = 30_000;

/**
 * Where the followed agent runs: on a host (this command handed it over, or follows a host's
 * agent), or in this process (`failed` rejects when it stops on an error).
 */
export type Hosting =
  | { kind: 'host'; handedOver: boolean }
  | { kind: 'here'; failed: Promise<never> };

/** What `followTurn` needs: the agent, its state so far, and where its turn is printed. */
export interface FollowTurnOptions extends TurnOutput {
  rt: Runtime;
  entry: Pick<DirectoryEntry, 'actorId' | 'rootId'>;
  /** The agent's state folded from its log so far; the events after its `seq` are printed. */
  from: Projection;
  /** Asks a person on a TTY; null: an approval or a question makes the command exit 5. */
  prompt: Prompt | null;
  /** Asks a question on a TTY (default, with `prompt`: on this command's terminal). */
  askQuestion?: QuestionPrompt;
  /** Approvals and questions this command answered (ID → message ID): their answers are on the way. */
  answered?: Map<string, string>;
  hosting: Hosting;
  /** When the turn must have ended (ms), before its `turn/start` says so; null: no deadline. */
  deadlineAt?: number | null;
  /** False when the events were printed already as they were committed (default true). */
  echo?: boolean;
}

/**
 * Follows the next end of a turn through the one client follower (`src/client`), printing the
 * events as they are committed (RunPrinter), then the answer and the outcome, with the exit code
 * of the outcome. When the agent commits `actor/parked` the approvals it waits on are asked on a
 * TTY and answered through the inbox (a question too: its options numbered), or printed with exit 5. Ctrl-C interrupts the turn through
 * the inbox wherever it runs (a second one leaves at once, see `InterruptKey`); SIGTERM or SIGHUP
 * leaves it as it is (128 + the signal). On a host: a host that dies does not end the following
 * (another host, or a later `resume`, takes it over); changes of holder, a long silence and a
 * deadline long past are said on stderr, the last with exit 4.
 */
export async function followTurn(o: FollowTurnOptions): Promise<number> {
  const { rt, entry, out } = o;
  const p = o.from;
  const answered = new Map(o.answered ?? []);
  const onHost = o.hosting.kind === 'host';
  const watch = new HolderWatch(o, o.hosting.kind === 'host' && o.hosting.handedOver);
  const stop = new AbortController();
  const resumeLine = cliLine(rt.config, 'resume', entry.actorId);
  const transport = personTransport(rt);
  const key = new InterruptKey({
    agentId: entry.actorId,
    resumeLine,
    send: async () => void (await transport.send({ type: 'interrupt', agentId: entry.actorId })),
    say: (line) => {
      o.printer.endLine();
      out.stderr.write(`\n${line}\n`);
    },
  });
  const onSigint = (): void => key.press();
  process.on('SIGINT', onSigint);
  // a person at the terminal (one who is asked for approvals) steers the turn by typing a line
  const typed = o.prompt ? steersFromTerminal({ agentId: entry.actorId, rt, out, printer: o.printer, onInterrupt: onSigint }) : null;
  typed?.start();
  const stopSignal = whenStopped();
  const stopped = stopSignal.stopped.then((signal) => ({ kind: 'stop' as const, signal }));
  const failed = o.hosting.kind === 'here' ? o.hosting.failed : new Promise<never>(() => {});
  const leaving = Promise.race([key.left, stopped]);
  // a host's agent may be parked already: what the log says it waits on is asked first
  const steps = followTurnSteps({ transport, agentId: entry.actorId, rootId: entry.rootId, from: p, answered, parkedAtStart: onHost, signal: stop.signal });
  const pull = () => steps.next().then((r) => ({ kind: 'step' as const, r }));
  let next = pull();
  let tick: Promise<{ kind: 'tick' }> | null = null;
  let lastEventAt = Date.now();
  o.printer.seedFrom(p);
  // a subagent waiting for a person is said here: its log is not the one this command prints
  // Without a terminal to ask on, a tree that can only wait for a person ends the command as a
  // parked agent does (exit 5), the subagent's answer lines said above.
  let stuckWith: (e: ActorEvent) => void = () => {};
  const stuck = new Promise<{ kind: 'stuck'; parked: ActorEvent }>((resolve) => (stuckWith = (parked) => resolve({ kind: 'stuck', parked })));
  const childWaits = watchChildWaits({
    reader: rt.reader, config: rt.config, rootId: entry.rootId, actorId: entry.actorId, signal: stop.signal,
    say: (lines) => {
      o.printer.endLine();
      out.stderr.write(`${lines.join('\n')}\n`);
    },
    ...(o.prompt ? {} : { onStuck: (e: ActorEvent) => stuckWith(e) }),
  });
  // the model's text as it streams, on a terminal: the supervisor publishes it wherever it runs
  const live = o.printer.wantsLive ? createNatsLiveSource(rt.bus.nc).watch(entry, (d) => o.printer.delta(d)) : null;
  const leave = (r: Awaited<typeof leaving>): number => {
    o.printer.endLine();
    const id = entry.actorId;
    if (onHost) {
      const why = r.kind === 'leave' && r.sent ? 'the interrupt is on its way to its host' : 'its turn goes on on its host';
      out.stderr.write(`\nstopped following ${id}; ${why} (\`${resumeLine}\` follows it again)\n`);
    } else if (r.kind === 'leave') {
      const why = r.sent ? 'the interrupt is in its inbox, and `resume` ends the turn cancelled' : 'the turn stays open';
      out.stderr.write(`\nleaving now: ${why} (\`${resumeLine}\` carries it on)\n`);
    } else {
      out.stderr.write(`\n${r.signal}: stopping; the turn stays open (\`${resumeLine}\` carries it on)\n`);
    }
    return r.kind === 'stop' ? exitCodeForSignal(r.signal) : EXIT.interrupted;
  };
  try {
    let waiting: string[] = [];
    for (;;) {
      if (waiting.length > 0) {
        // who holds the agent is said before what it waits for
        if (onHost) await watch.last(p);
        o.printer.endLine();
        if (!o.prompt) return await printWaiting(o, { actorId: entry.actorId, projection: p }, waiting, rt.config);
        // the prompt reads the terminal alone: typed lines wait until it is answered
        typed?.pause();
        // a person deciding is not the run's time: the status line's clock stops meanwhile
        o.printer.holdProgress(true, 'person');
        const ask = askPerson({
          transport, agentId: entry.actorId, projection: p, waiting, prompt: o.prompt, askQuestion: o.askQuestion ?? ttyQuestionPrompt(out.stdin!, out.stderr), answered,
          interrupted: () => key.press(),
        });
        const asked = await Promise.race([ask.then(() => null), leaving]).finally(() => o.printer.holdProgress(false, 'person'));
        if (asked) return leave(asked);
        typed?.start();
        waiting = [];
        lastEventAt = Date.now();
      }
      if (onHost) tick ??= new Promise((resolve) => setTimeout(() => resolve({ kind: 'tick' }), TICK_MS));
      const r = await Promise.race([next, leaving, failed, stuck, ...(tick ? [tick] : [])]);
      if (r.kind === 'leave' || r.kind === 'stop') return leave(r);
      if (r.kind === 'stuck') {
        o.printer.endLine();
        // --json: the last line is the fact that the tree waits, as it is for an agent parked itself
        if (o.json) out.stdout.write(`${JSON.stringify(r.parked)}\n`);
        return EXIT.waiting;
      }
      if (r.kind === 'tick') {
        tick = null;
        const now = Date.now();
        watch.look(now, lastEventAt, p);
        if (watch.overdue(now, p)) return EXIT.stopped;
        continue;
      }
      // the follower ends only when asked to, which happens after this loop
      if (r.r.done) throw new Error(`the log follower of ${entry.actorId} ended`);
      const step = r.r.value;
      if (step.kind === 'ended') {
        // not past a turn's end: the follower reads nothing after it, so a caller following on
        // from this projection (`run --continue`) prints the next turn's first events
        key.clear();
        typed?.stop();
        if (onHost) await watch.last(p);
        return await printTurnEnd(o, { actorId: entry.actorId, projection: p }, await withWholeAnswer(o.rt, turnEndOf(step.event), step.event), o.rt.config);
      }
      next = pull();
      if (step.kind === 'parked') {
        waiting = step.waiting;
        continue;
      }
      lastEventAt = Date.now();
      if (o.echo !== false) o.printer.commit([step.event]);
    }
  } finally {
    live?.close();
    key.clear();
    typed?.stop();
    process.off('SIGINT', onSigint);
    stopSignal.dispose();
    stop.abort();
    // the read under way ends with the connection: its error is nobody's to handle now
    next.catch(() => {});
    void steps.return(undefined).catch(() => {});
    // it ends with the abort above (or the connection): nothing waits on it
    void childWaits;
  }
}

/**
 * An answer too big for the log is a preview there and whole in the blob store: a host on this
 * data dir wrote it to the same LMDB, so the person gets it whole; a host with a data dir of its
 * own kept it there, and the preview (which says so) is what this command can print.
 */
async function withWholeAnswer(rt: Runtime, ended: TurnEnded, e: TurnEndEvent): Promise<TurnEnded> {
  const ref = e.data.answerRef;
  if (!ref) return ended;
  const whole = await rt.blobs.getText(ref.digest).catch(() => undefined);
  return whole === undefined ? ended : { ...ended, answer: whole };
}


/** The approvals a person must answer (the turn follower's). */
export { awaitingPerson };

/** Resolves when `p` settles or after `ms`, whichever is first. */
function bounded(p: Promise<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    void p.finally(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * Says on stderr who holds the agent as that changes, and what the follower still waits for. Its
 * looks run beside the follower, one at a time, never in its way: a slow bus must not hold back
 * the events or the turn's end.
 */
class HolderWatch {
  /** The holder last seen; undefined before the first look. */
  private holder: string | null | undefined = undefined;
  private seen = false;
  private lastPollAt = 0;
  private lastNoticeAt = Date.now();
  private saidDead: string | null = null;
  private saidNoHost = false;
  private looking: Promise<void> | null = null;

  constructor(private readonly o: FollowTurnOptions, private readonly handedOver: boolean) {}

  private say(line: string): void {
    this.o.printer.endLine();
    // host names come from other processes' records: shown, not acted on
    this.o.out.stderr.write(`${terminalText(line)}\n`);
  }

  /** Starts a look at the agent's lease and the live hosts when one is due and none is running. */
  look(now: number, lastEventAt: number, p: Projection): void {
    if (this.looking || now - this.lastPollAt < (this.seen ? HOLDER_POLL_MS : HOLDER_POLL_FIRST_MS)) return;
    this.lastPollAt = now;
    this.looking = this.poll(now, lastEventAt, p, false).finally(() => (this.looking = null));
  }

  /** Before the turn's end is printed: the look under way, and one more if no holder was seen yet (bounded). */
  async last(p: Projection): Promise<void> {
    if (this.looking) await bounded(this.looking, LAST_LOOK_MS);
    if (!this.seen) await bounded(this.poll(Date.now(), Date.now(), p, true), LAST_LOOK_MS);
  }

  private async poll(now: number, lastEventAt: number, p: Projection, last: boolean): Promise<void> {
    let place: Placement;
    try {
      place = await placementOf(this.o.rt, this.o.entry.actorId);
    } catch {
      // NATS restarting: the log follower waits for it too; look again at the next poll
      return;
    }
    const id = this.o.entry.actorId;
    const holder = place.kind === 'host' ? place.host : place.kind === 'other' ? place.holder : null;
    if (holder !== this.holder) {
      if (holder && !this.seen) {
        this.say(this.handedOver ? `handed ${id} to host ${holder}; following its events` : `${id} is run by ${holder}; following its events`);
      } else if (holder) {
        this.say(`${id} was taken over by ${holder}`);
      } else if (this.holder) {
        this.say(`${this.holder} no longer holds ${id}; waiting for a host to take it over`);
      }
      this.seen ||= holder !== null;
      this.holder = holder;
      this.saidDead = null;
    }
    if (place.kind === 'host' && !place.hosts.some((h) => h.name === place.host) && this.saidDead !== place.host) {
      this.saidDead = place.host;
      this.say(`host ${place.host} is gone; another host takes ${id} over once its lease lapses (within ${Math.ceil(this.o.rt.leases.ttlMs / 1000)} s)`);
    }
    if (place.kind === 'free' && place.hosts.length === 0 && !this.saidNoHost && !last) {
      this.saidNoHost = true;
      const config = this.o.rt.config;
      this.say(`no host is running to take ${id}: start \`${cliLine(config, 'host')}\`, or \`${cliLine(config, 'resume', id, '--in-process')}\` hosts it here; still following (Ctrl-C stops)`);
    }
    if (place.hosts.length > 0) this.saidNoHost = false;
    if (now - lastEventAt >= QUIET_NOTICE_MS && now - this.lastNoticeAt >= QUIET_NOTICE_MS) {
      this.lastNoticeAt = now;
      const where = holder ? `${holder} holds it` : 'no host holds it';
      this.say(`${id}: no event for ${Math.round((now - lastEventAt) / 1000)} s (${where}${p.openStep ? `, step ${p.openStep.index} open` : ''}); still following`);
    }
  }

  /**
   * True (and said) when the turn's deadline passed long ago and no host ended the turn: a host
   * ends it at its deadline, so past two lease TTLs and ten seconds more, nobody runs it.
   */
  overdue(now: number, p: Projection): boolean {
    const deadlineAt = p.openTurn ? p.openTurn.settings.budgets.deadlineAt : (this.o.deadlineAt ?? null);
    if (deadlineAt === null || now < deadlineAt + 2 * this.o.rt.leases.ttlMs + 10_000) return false;
    const id = this.o.entry.actorId;
    this.say(`${id}: its turn's deadline passed at ${new Date(deadlineAt).toISOString()} and no host ended the turn; \`${cliLine(this.o.rt.config, 'resume', id)}\` ends it`);
    return true;
  }
}
