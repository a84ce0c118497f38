// The job places of a tree (design §6a, §11b: `max_running_jobs` per tree): one record per root,
// holding the jobs that run and on which host. A job takes its place before its command starts
// and gives it back once the command ended, so what runs at once across every host of a
// deployment is within what the record allowed. Built like the tree's child places
// (`src/bus/tree-slot-port.ts`): `createKvJobSlots` (a compare-and-set KV record per tree) and
// `createMemoryJobSlots` implement it, and `test/contract/job-slots.contract.ts` holds both to it.

/** One job holding a place: the host that runs it, and when it took the place. */
export interface JobSlotHolder {
  hostId: string;
  atMs: number;
}

/** What a take says: the place is the job's, or the tree is full with these holders. */
export type JobSlotTake = { taken: true } | { taken: false; holders: Record<string, JobSlotHolder> };

/** The job places of every tree, shared by every host of a deployment. */
export interface JobSlotStore {
  /**
   * Takes a place in tree `treeId` for `jobId` run by `hostId`, unless `max` jobs hold one already.
   * A job that holds a place keeps it (a take retried after a crash, or by the job's next holder
   * after its host died, neither counts twice nor is refused), and its holder becomes `hostId`.
   */
  take(treeId: string, jobId: string, hostId: string, max: number, nowMs: number): Promise<JobSlotTake>;
  /** Gives back a job's place. Idempotent. */
  release(treeId: string, jobId: string): Promise<void>;
  /** The jobs holding places in a tree now (the next holder of a dead host's jobs reads them). */
  holders(treeId: string): Promise<Record<string, JobSlotHolder>>;
}

/** Error codes of job places on the bus. */
export const JOB_SLOT_CODES = { failed: 'bus.job_slots_failed' } as const;

/** The holders after a take; 'unchanged' when the job holds its place on this host already, null when the tree is full. */
export function afterTakeJobSlot(
  holders: Record<string, JobSlotHolder>, jobId: string, hostId: string, max: number, nowMs: number,
): Record<string, JobSlotHolder> | 'unchanged' | null {
  const mine = holders[jobId];
  if (mine?.hostId === hostId) return 'unchanged';
  if (mine) return { ...holders, [jobId]: { hostId, atMs: mine.atMs } };
  if (Object.keys(holders).length >= max) return null;
  return { ...holders, [jobId]: { hostId, atMs: nowMs } };
}

/** The holders after a release, or 'unchanged' when the job held no place. */
export function afterReleaseJobSlot(holders: Record<string, JobSlotHolder>, jobId: string): Record<string, JobSlotHolder> | 'unchanged' {
  if (!(jobId in holders)) return 'unchanged';
  const { [jobId]: _gone, ...rest } = holders;
  return rest;
}
