import type { EffectiveConfig } from '../../config/config.js';
import type { ActorEvent } from '../../protocol/events.js';
import { formatViolations, isJobLog, verifyJobLog, verifyLog } from '../../verify/verify.js';
import { EXIT } from '../exit-codes.js';
import { EventDescriber, eventLine, type Out } from '../output.js';
import { createLogger, openRuntime, type Runtime } from '../runtime.js';
import { terminalText } from '../../client/terminal-text.js';
import { exitCodeForSignal, onStop, stopReceived } from '../stop-signals.js';
import { entryOf } from '../hand-off.js';
import { followAgent } from '../../client/follower.js';
import { emptyProjection } from '../../store/projection.js';
import { verifyTreeCommand } from '../tree/verify-tree.js';
import { treeEventsCommand } from '../tree/tree-events.js';

async function rootOf(rt: Runtime, agentId: string): Promise<string> {
  return (await entryOf(rt, agentId)).rootId;
}

async function withRuntime<T>(config: EffectiveConfig, fn: (rt: Runtime) => Promise<T>): Promise<T> {
  // events, runs and verify read: a client login is all they need
  const rt = await openRuntime(config, createLogger(config), { role: 'client' });
  try {
    return await fn(rt);
  } finally {
    await rt.close();
  }
}

/** `actorloop events`: an agent's log from a sequence on, optionally following live commits; `--tree`: every log of its tree. */
export async function eventsCommand(
  agentId: string,
  opts: { after?: number; follow?: boolean; json?: boolean; tree?: boolean },
  config: EffectiveConfig,
  out: Out,
): Promise<number> {
  return withRuntime(config, async (rt) => {
    if (opts.tree) return treeEventsCommand(rt, agentId, opts, out);
    const rootId = await rootOf(rt, agentId);
    const after = opts.after ?? 0;
    // people read incarnations (1, 2, 3…) counted from the log's first event, also after --after
    const describer = new EventDescriber();
    const print = (e: ActorEvent): void => {
      out.stdout.write(opts.json ? eventLine(e) : `${describer.describe(e)}\n`);
    };
    if (!opts.json && after > 0) {
      // the events before the first one printed: their epochs number the incarnations
      for await (const { event } of rt.reader.read(rootId, agentId, { afterSeq: 0 })) {
        if (event.seq > after) break;
        describer.note(event);
      }
    }
    if (!opts.follow) {
      for await (const { event } of rt.reader.read(rootId, agentId, { afterSeq: after })) print(event);
      return EXIT.completed;
    }
    const stop = new AbortController();
    const onSigint = (): void => stop.abort();
    process.once('SIGINT', onSigint);
    const offStop = onStop(() => stop.abort());
    // the one client follower; `--after` skips what came before (its state is not needed to print)
    const from = { ...emptyProjection(agentId), seq: after };
    try {
      for await (const { event } of followAgent({ reader: rt.reader, rootId, actorId: agentId, from, signal: stop.signal })) print(event);
    } finally {
      process.off('SIGINT', onSigint);
      offStop();
    }
    const signal = stopReceived();
    return signal === null ? EXIT.completed : exitCodeForSignal(signal);
  });
}

/** `actorloop verify`: checks an agent's log against the invariants of the design; exit 1 on any violation. */
export async function verifyCommand(agentId: string, opts: { json?: boolean; tree?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  return withRuntime(config, async (rt) => {
    const rootId = await rootOf(rt, agentId);
    // --tree: the whole tree the agent is in, from its root
    if (opts.tree) return verifyTreeCommand(rt.reader, rootId, opts, out, config.subagents);
    const events: ActorEvent[] = [];
    for await (const { event } of rt.reader.read(rootId, agentId, { afterSeq: 0 })) events.push(event);
    // a job's log (`actorloop verify <jobId>`) keeps a job's invariants, not an agent's
    const violations = isJobLog(events) ? verifyJobLog(events) : verifyLog(events);
    if (opts.json) {
      out.stdout.write(`${JSON.stringify({ agentId, events: events.length, ok: violations.length === 0, violations })}\n`);
    } else if (violations.length === 0) {
      out.stdout.write(`${agentId}: ${events.length} events, all invariants hold\n`);
    } else {
      out.stdout.write(`${agentId}: ${violations.length} violation(s) in ${events.length} events\n${terminalText(formatViolations(violations), 'block')}\n`);
    }
    return violations.length === 0 ? EXIT.completed : EXIT.failed;
  });
}
