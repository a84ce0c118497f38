import { deadLocalHolder } from '../actors/hosting/lease-keeper.js';
import type { DirectoryEntry } from '../bus/directory.js';
import type { HostRecord } from '../bus/hosts.js';
import { ensureInboxConsumer, openInbox, publishInbox } from '../bus/inbox.js';
import { claimSubject } from '../bus/subjects.js';
import { agentNotFound, NotFoundError } from '../protocol/errors.js';
import type { InboxMessage } from '../protocol/inbox.js';
import { emptyProjection, foldEvent, type Projection } from '../store/projection.js';
import type { Runtime } from './runtime.js';
import { cliLine, placeholder } from './hints.js';
import { resolve } from 'node:path';

// A command hands its agent to a running `actorloop host` instead of hosting it in-process when
// one is live (design §7: a host process runs one supervisor). The lease, not the `hosts` record,
// decides who runs an agent: a command that hands work over takes no lease, it writes the
// directory entry and the inbox message a host claims by, and follows the log.

/** Who runs an agent now, as far as a command can tell from its lease and the `hosts` bucket. */
export type Placement =
  /** A host holds its lease (alive, or dead with its lease not lapsed yet: another host takes it over then). */
  | { kind: 'host'; host: string; hosts: HostRecord[] }
  /** Another live process holds it, a command hosting it in-process. */
  | { kind: 'other'; holder: string; hosts: HostRecord[] }
  /** Nobody live holds it; `hosts` are the live hosts that may take it (none: host it here). */
  | { kind: 'free'; hosts: HostRecord[] };

/** Where an agent is run now. */
export async function placementOf(rt: Runtime, agentId: string): Promise<Placement> {
  const now = Date.now();
  const [lease, hosts] = await Promise.all([rt.leases.get(agentId, now), rt.hosts.live(now)]);
  if (!lease || deadLocalHolder(lease.host)) return { kind: 'free', hosts };
  if (hosts.some((h) => h.name === lease.host) || (await rt.hosts.known(lease.host))) return { kind: 'host', host: lease.host, hosts };
  return { kind: 'other', holder: lease.host, hosts };
}

/** An agent's directory entry; NotFoundError (exit 3) when it is not in this data dir. */
export async function entryOf(rt: Runtime, agentId: string): Promise<DirectoryEntry> {
  const entry = await rt.bus.directory.get(agentId);
  if (!entry) {
    throw agentNotFound(agentId);
  }
  return entry;
}

/**
 * The agent `--last` means: the one of this data dir's directory whose workspace is `workspace`
 * and whose entry changed last (a turn's end updates it). A NotFoundError when there is none.
 */
export async function latestAgent(rt: Runtime, workspace: string): Promise<DirectoryEntry> {
  const dir = resolve(workspace);
  const mine = (await rt.bus.directory.list())
    // a child agent is its parent's to talk to
    .filter((e) => e.kind === 'agent' && e.parentId === null && e.workspace !== undefined && resolve(e.workspace) === dir)
    .sort((a, b) => b.updatedAt.localeCompare(a.updatedAt) || b.createdAt.localeCompare(a.createdAt));
  const latest = mine[0];
  if (!latest) {
    throw new NotFoundError('cli.no_last_agent', `no agent has run in ${dir} with this data dir`, {
      hint: `start one with ${cliLine(rt.config, 'run', placeholder('"<task>"'))} (or pass --cwd <the workspace it ran in>); ${cliLine(rt.config, 'runs')} lists them all`,
    });
  }
  return latest;
}

/** An agent's state folded from its whole log (its `seq` is where the log ended). */
export async function foldLog(rt: Runtime, entry: DirectoryEntry): Promise<Projection> {
  const p = emptyProjection(entry.actorId);
  for await (const { event } of rt.reader.read(entry.rootId, entry.actorId, { afterSeq: 0 })) foldEvent(p, event);
  return p;
}

/** Messages waiting in an agent's inbox: not yet taken by whoever hosts it. */
export async function inboxPending(rt: Runtime, agentId: string): Promise<number> {
  return (await openInbox(rt.bus.js, rt.bus.jsm, agentId, { logger: rt.logger })).pending();
}

/**
 * Makes a new agent known without hosting it: its directory entry (status `running`, which a host
 * claims) and its inbox consumer, then its first message. A live host claims it on the mail.
 */
export async function submitToHosts(rt: Runtime, entry: Omit<DirectoryEntry, 'createdAt' | 'updatedAt' | 'status'>, msg: InboxMessage): Promise<void> {
  const now = new Date().toISOString();
  // the entry first: a host that sees the mail hydrates the agent from its directory entry
  await rt.bus.directory.put({ ...entry, status: 'running', createdAt: now, updatedAt: now });
  await ensureInboxConsumer(rt.bus.jsm, entry.actorId);
  await publishInbox(await rt.bus.person(), msg, 'person');
}

/**
 * Lets a live host take an agent nobody live holds: a lease left by a process of this machine that
 * is gone is released at once (taken from it by CAS, then deleted), the agent is marked `running`
 * in the directory (a host's periodic pass claims such an agent), and the live hosts are asked to
 * claim it now (`claim.<agentId>`, core NATS: a request lost on the way waits for that pass).
 */
export async function releaseToHosts(rt: Runtime, entry: DirectoryEntry): Promise<void> {
  const lease = await rt.leases.get(entry.actorId, Date.now());
  if (lease && deadLocalHolder(lease.host)) {
    await rt.pin(entry.actorId);
    await rt.unpin(entry.actorId);
  }
  if (entry.status !== 'running' && entry.status !== 'waiting') {
    await rt.bus.directory.put({ ...entry, status: 'running', updatedAt: new Date().toISOString() });
  }
  rt.bus.nc.publish(claimSubject(entry.actorId));
  await rt.bus.nc.flush();
}
