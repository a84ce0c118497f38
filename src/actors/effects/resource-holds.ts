import type { Logger } from 'pino';
import type { ResourceLease, ResourceLeaseMode, ResourceLeaseStore } from '../../bus/resource-lease-port.js';
import { ActorloopError } from '../../protocol/errors.js';
import { sleep } from '../../protocol/sleep.js';
import type { ResourceKey } from '../../tools/tool.js';
import type { Projection } from '../../store/projection.js';

// A call's hold on the resources it writes, across the agents of a tree (design §8): "calls whose
// resource keys overlap run in order — across subagents too, through leases". Inside one agent
// the tool runner already orders them; the leases order calls of different agents (a parent and
// its `shared` children, two children), on any host.

/** Backoff between looks at a held resource: short first (a write of a file is quick), then up to a second. */
const FIRST_WAIT_MS = 20;
const MAX_WAIT_MS = 1_000;

/** Resources held by one call until its result; `release` is idempotent. */
export interface ResourceHold {
  release(): void;
}

/** True when an agent is part of a tree (a child, or a parent with children): only then do its calls take leases. */
export function inTree(p: Projection): boolean {
  if (p.parentLink) return true;
  for (const _ in p.children ?? {}) return true;
  return false;
}

/** One lease a call needs. */
export interface LeaseNeed {
  resource: string;
  mode: ResourceLeaseMode;
}

/**
 * The leases a call's write-mode resources need, as the runner's own `conflicts` orders calls:
 * a file write holds its file alone and its workspace shared; `process` (a process may touch
 * anything in its workspace) holds the workspace alone, so it waits for every write there and
 * every write waits for it, while writes of two files go on together. Scoped to the workspace: a
 * shell in one child's worktree does not wait for one in another's. Agent-local keys (`plan`,
 * `goal`) are no other agent's business.
 */
export function leaseResources(keys: readonly ResourceKey[], workspace: string): LeaseNeed[] {
  const out = new Map<string, ResourceLeaseMode>();
  const need = (resource: string, mode: ResourceLeaseMode): void => {
    if (out.get(resource) !== 'exclusive') out.set(resource, mode);
  };
  const ws = `process:${workspace}`;
  for (const k of keys) {
    if (k.mode !== 'write') continue;
    if (k.key === 'process') need(ws, 'exclusive');
    else if (k.key.startsWith('path:')) {
      need(k.key, 'exclusive');
      need(ws, 'shared');
    }
  }
  // one order for every agent: two calls wanting the same two resources cannot each hold one
  return [...out].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([resource, mode]) => ({ resource, mode }));
}

/** Options of `holdResources`. */
export interface HoldOptions {
  /** Aborting stops the wait (the call then never starts) and lets go of what was taken. */
  signal: AbortSignal;
  nowMs(): number;
  logger: Logger;
}

/**
 * Takes every resource's lease in order, waiting (polling with backoff) while another call holds
 * one, and renews them every third of the TTL until released. Rejects with the abort's reason
 * when the signal aborts first; a store error that a retry may cure is retried, any other rejects.
 */
export async function holdResources(store: ResourceLeaseStore, needs: readonly LeaseNeed[], holder: string, opts: HoldOptions): Promise<ResourceHold> {
  let held: ResourceLease[] = [];
  const letGo = (leases: ResourceLease[]): void => {
    for (const l of leases) {
      store.release(l).catch((err: unknown) => opts.logger.warn({ err, resource: l.resource }, 'resource lease not released; it lapses after its TTL'));
    }
  };
  try {
    for (const { resource, mode } of needs) {
      let waitMs = FIRST_WAIT_MS;
      for (;;) {
        opts.signal.throwIfAborted();
        let lease: ResourceLease | null = null;
        try {
          lease = await store.take(resource, holder, mode, opts.nowMs());
        } catch (err) {
          if (!(err instanceof ActorloopError && err.retryable)) throw err;
          opts.logger.warn({ err, resource }, 'resource lease store failed; trying again');
        }
        if (lease) {
          held.push(lease);
          break;
        }
        await sleep(waitMs, opts.signal);
        waitMs = Math.min(waitMs * 2, MAX_WAIT_MS);
      }
    }
  } catch (err) {
    letGo(held);
    throw err;
  }
  // a renewal in flight lands before the release, so the release is the last word on each record
  let renewing: Promise<void> | null = null;
  const renewal = setInterval(() => {
    if (renewing) return;
    renewing = Promise.all(held.map(async (l) => {
      const renewed = await store.renew(l, opts.nowMs()).catch((err: unknown) => {
        opts.logger.warn({ err, resource: l.resource }, 'resource lease not renewed; trying again');
        return l;
      });
      // lost (this process stalled past the TTL): the call runs on, and says so
      if (renewed === null) opts.logger.warn({ resource: l.resource, holder }, 'resource lease lapsed while its call ran');
      return renewed ?? l;
    })).then((next) => {
      held = next;
      renewing = null;
    });
  }, Math.max(1, Math.floor(store.ttlMs / 3)));
  renewal.unref();
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      clearInterval(renewal);
      void (renewing ?? Promise.resolve()).then(() => letGo(held));
    },
  };
}
