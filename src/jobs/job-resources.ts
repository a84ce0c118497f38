import type { Logger } from 'pino';
import type { ResourceLease, ResourceLeaseStore } from '../bus/resource-lease-port.js';

// The named resources a job holds while it runs (`start_job`'s `resources`): an exclusive
// resource lease on `job:<name>` each, on the same store that orders conflicting calls of a
// tree's agents, so of the jobs naming one resource (on any host) one runs at a time. Taken after
// the job's scheduler slot and before its `job/started`, renewed every third of the lease TTL
// while it runs, released once its end is committed. A holder that died frees them after the TTL.

/** How often a job waiting for a resource another job holds asks again. */
export const RESOURCE_RETRY_MS = 500;

/** The resource key a job's named resource is leased under. */
export function jobResourceKey(name: string): string {
  return `job:${name}`;
}

/** Resources one execution holds. */
export interface HeldResources {
  /** Gives every lease back. Idempotent. */
  release(): Promise<void>;
}

/**
 * Takes every named resource for `holder` (the job and its attempt), in name order so two jobs
 * naming the same ones cannot each hold one the other waits for; waits while another holds one,
 * until `signal` aborts (then it gives back what it took and rejects with the signal's reason).
 */
export async function holdResources(
  store: ResourceLeaseStore, names: readonly string[], holder: string,
  opts: { signal: AbortSignal; nowMs: () => number; logger: Logger; onWait?: (resource: string, holders: string[]) => void },
): Promise<HeldResources> {
  const leases: ResourceLease[] = [];
  const release = async (): Promise<void> => {
    clearInterval(timer);
    const all = leases.splice(0);
    await Promise.all(all.map((l) => store.release(l).catch((err: unknown) => opts.logger.warn({ err, resource: l.resource }, 'resource lease not released; it lapses after its TTL'))));
  };
  const timer = setInterval(() => {
    for (const [i, l] of leases.entries()) {
      void store.renew(l, opts.nowMs()).then((r) => {
        if (r) leases[i] = r;
        else opts.logger.warn({ resource: l.resource, holder }, 'resource lease lost while the job ran');
      }, () => {});
    }
  }, Math.max(100, Math.floor(store.ttlMs / 3)));
  timer.unref?.();
  try {
    for (const name of [...new Set(names)].sort()) {
      const key = jobResourceKey(name);
      for (;;) {
        opts.signal.throwIfAborted();
        const lease = await store.take(key, holder, 'exclusive', opts.nowMs());
        if (lease) {
          leases.push(lease);
          break;
        }
        opts.onWait?.(key, await store.holdersOf(key, opts.nowMs()).catch(() => []));
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, RESOURCE_RETRY_MS);
          opts.signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
        });
      }
    }
  } catch (err) {
    await release();
    throw err;
  }
  return { release };
}
