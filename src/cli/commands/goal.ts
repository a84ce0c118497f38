import { Writable } from 'node:stream';
import { publishInbox } from '../../bus/inbox.js';
import type { DirectoryEntry } from '../../bus/directory.js';
import type { EffectiveConfig } from '../../config/config.js';
import { ConfigError } from '../../protocol/errors.js';
import type { ActorEvent } from '../../protocol/events.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import { goalView, type GoalRecord } from '../../store/goal-projection.js';
import { foldEvent, type Projection } from '../../store/projection.js';
import { EXIT } from '../exit-codes.js';
import { entryOf, foldLog, placementOf, releaseToHosts } from '../hand-off.js';
import { lineFor, placeholder } from '../hints.js';
import type { Out } from '../output.js';
import { createLogger, openRuntime, type Runtime } from '../runtime.js';
import { terminalText } from '../../client/terminal-text.js';
import { goalControlMessage } from '../../client/messages.js';
import { hostExisting } from '../turn/turn-hosting.js';

/** Options of `actorloop goal`. */
export interface GoalOptions {
  json?: boolean;
  /** With an action: change the goal in this process when no host holds the agent, even with hosts running. */
  inProcess?: boolean;
}

/** How long a change waits for the agent to take it before the command says it is still on its way. */
const TAKE_TIMEOUT_MS = 30_000;

/** A goal for a person: objective, phase and why, revision, what it spent of what budget. */
export function describeGoal(g: GoalRecord): string {
  const spent = [
    `${g.usage.tokens.toLocaleString('en-US')}${g.budget.tokens !== undefined ? ` of ${g.budget.tokens.toLocaleString('en-US')}` : ''} tokens`,
    `${g.usage.costUsd === null ? 'cost unknown' : `$${g.usage.costUsd.toFixed(4)}`}${g.budget.costUsd !== undefined ? ` of $${g.budget.costUsd}` : ''}`,
    `${g.usage.seconds.toFixed(1)}${g.budget.seconds !== undefined ? ` of ${g.budget.seconds}` : ''} s`,
  ];
  const reason = g.reason ? ` (${terminalText(g.reason, 'line')})` : '';
  return `goal ${g.id} · ${g.phase}${reason} · revision ${g.revision}\n  ${terminalText(g.objective, 'line')}\n  spent ${spent.join(' · ')}\n`;
}

/**
 * `actorloop goal <agent>`: the agent's goal as its log has it (`--json`: the goal record). With
 * `pause | resume | cancel`: a person's change, sent as a `goal_control` message on the person
 * channel; the agent commits the `goal/updated` (or refuses, saying why: exit 2), wherever it is
 * hosted, or here when nobody hosts it. An agent with no goal is exit 2.
 */
export async function goalCommand(agentId: string, action: string | undefined, opts: GoalOptions, config: EffectiveConfig, out: Out): Promise<number> {
  if (action !== undefined && action !== 'pause' && action !== 'resume' && action !== 'cancel') {
    throw new ConfigError('cli.goal_action', `unknown goal action "${action}"`, { hint: `${lineFor(config)('goal', agentId)} shows the goal; add pause, resume or cancel to change it` });
  }
  // reading a log needs only a client login; a change may host the agent here
  const rt = await openRuntime(config, createLogger(config), action === undefined ? { role: 'client' } : {});
  try {
    const entry = await entryOf(rt, agentId);
    const p = await foldLog(rt, entry);
    const g = p.goal;
    if (!g) {
      throw new ConfigError('cli.no_goal', `${agentId} has no goal`, { hint: 'start one with actorloop run --goal "<objective>" "<task>" (or run --continue <agent> --goal ...)' });
    }
    if (action === undefined) {
      out.stdout.write(opts.json ? `${JSON.stringify(goalView(g))}\n` : describeGoal(g));
      return EXIT.completed;
    }
    const msg = goalControlMessage(agentId, { action, expectedRevision: g.revision });
    const taken = await deliver(rt, entry, p, msg, opts.inProcess === true);
    if (taken === null) {
      out.stderr.write(`the ${action} is in the inbox of ${agentId} but was not taken within ${TAKE_TIMEOUT_MS / 1000} s; its host takes it when it next runs (${lineFor(config)('goal', agentId)} shows the goal)\n`);
      return EXIT.stopped;
    }
    if (taken.type === 'inbox/cancelled') {
      throw new ConfigError('cli.goal_refused', `${agentId} refused to ${action} its goal: ${taken.data.reason}`, { hint: `${lineFor(config)('goal', agentId)} shows the goal as it is now` });
    }
    const now = taken.p.goal!;
    out.stdout.write(opts.json ? `${JSON.stringify(goalView(now))}\n` : describeGoal(now));
    if (action === 'resume' && taken.p.openTurn === null) {
      out.stderr.write(`the goal is active again; its next turn (${lineFor(config)('run', '--continue', agentId, placeholder('"<task>"'))}) works toward it, and goes on from there while it makes progress\n`);
    }
    return EXIT.completed;
  } finally {
    await rt.close();
  }
}

type Taken = { type: 'goal/updated'; p: Projection } | { type: 'inbox/cancelled'; data: { reason: string } };

/**
 * Sends the change where the agent is: mail to the host or command that holds it (handed to a live
 * host when nobody does), else the agent hosted here until it took it. Resolves with what the
 * agent committed for the message, or null when it was not taken in time.
 */
async function deliver(rt: Runtime, entry: DirectoryEntry, from: Projection, msg: InboxMessage, inProcess: boolean): Promise<Taken | null> {
  const place = await placementOf(rt, entry.actorId);
  const elsewhere = place.kind === 'host' || place.kind === 'other' || (place.kind === 'free' && place.hosts.length > 0 && !inProcess);
  if (elsewhere) {
    if (place.kind === 'free') await releaseToHosts(rt, entry);
    await publishInbox(await rt.bus.person(), msg, 'person');
    return watchLog(rt, entry, from, msg.id);
  }
  // hosted only to take the change: what it commits is the command's output, not a run's
  const h = await hostExisting(entry.actorId, rt, { stdout: silent(), stderr: silent() }, true);
  await h.supervisor.send(msg);
  return watchLog(rt, entry, from, msg.id);
}

/** Reads the log on from `p` until an event settles message `messageId`. */
async function watchLog(rt: Runtime, entry: DirectoryEntry, p: Projection, messageId: string): Promise<Taken | null> {
  const until = Date.now() + TAKE_TIMEOUT_MS;
  while (Date.now() < until) {
    for await (const { event } of rt.reader.read(entry.rootId, entry.actorId, { afterSeq: p.seq })) {
      foldEvent(p, event);
      const settled = settles(event, messageId);
      if (settled === 'updated') return { type: 'goal/updated', p };
      if (settled === 'cancelled' && event.type === 'inbox/cancelled') return { type: 'inbox/cancelled', data: event.data };
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return null;
}

function settles(e: ActorEvent, messageId: string): 'updated' | 'cancelled' | null {
  if (e.type === 'goal/updated' && e.data.messageId === messageId) return 'updated';
  if (e.type === 'inbox/cancelled' && e.data.messageId === messageId) return 'cancelled';
  return null;
}

function silent(): Writable {
  return new Writable({ write: (_chunk, _enc, done) => done() });
}
