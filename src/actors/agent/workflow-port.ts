import type { EventData } from '../../protocol/events.js';

/**
 * What an agent starts workflow runs through (`start_workflow`): a run is an actor of its own,
 * created once by its ID (a start retried after a crash creates nothing twice) and hosted where
 * its lease is taken; its end comes back to the owner as a `job_notice`.
 */
export interface WorkflowPort {
  /** Creates the run once (its log's `workflow/created`, its directory entry) and hosts it here when this process may take its lease. */
  start(data: EventData<'workflow/created'>): Promise<void>;
}
