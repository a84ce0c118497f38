import type { EffectiveConfig } from '../../config/config.js';
import { durationText, exitText, jobPhaseText, type JobView } from '../../client/job-view.js';
import { terminalText } from '../../client/terminal-text.js';
import { EXIT } from '../exit-codes.js';
import { listJobs } from '../job-reads.js';
import type { Out } from '../output.js';
import { createLogger, openRuntime } from '../runtime.js';

/** Options of `actorloop jobs`. */
export interface JobsOptions {
  json?: boolean;
}

/** The columns of `jobs`, each with the cell it shows of a job. */
const COLUMNS: ReadonlyArray<[string, (v: JobView) => string]> = [
  ['ID', (v) => v.jobId],
  ['NAME', (v) => terminalText(v.name)],
  ['PHASE', (v) => jobPhaseText(v)],
  ['ATTEMPTS', (v) => String(v.attempts)],
  ['EXIT', (v) => exitText(v)],
  ['DURATION', (v) => durationText(v.durationMs)],
  ['OWNER', (v) => v.ownerId],
];

/** The table of `jobs`: a header, a row per job, the columns padded to line up. */
export function jobsTable(views: readonly JobView[]): string {
  const rows = [COLUMNS.map(([h]) => h), ...views.map((v) => COLUMNS.map(([, cell]) => cell(v)))];
  const widths = COLUMNS.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd()).join('\n');
}

/**
 * `actorloop jobs [<agentId>] [--json]`: the background jobs of one agent (those its `start_job`
 * calls started), or of every tree of this data dir, newest first, each as its own log says: ID,
 * name, phase (`queued #N` while it waits for a slot), attempts, exit, duration, owner. `--json`:
 * one array of the same facts.
 */
export async function jobsCommand(agentId: string | undefined, opts: JobsOptions, config: EffectiveConfig, out: Out): Promise<number> {
  // reading the directory and logs: a client login is all it needs
  const rt = await openRuntime(config, createLogger(config), { role: 'client' });
  try {
    const views = await listJobs(rt, agentId ?? null, Date.now());
    if (opts.json) {
      out.stdout.write(`${JSON.stringify(views)}\n`);
      return EXIT.completed;
    }
    if (views.length === 0) {
      out.stdout.write(agentId === undefined ? 'no jobs yet: an agent starts one with its start_job tool\n' : `${agentId} has started no jobs\n`);
      return EXIT.completed;
    }
    out.stdout.write(`${jobsTable(views)}\n`);
    return EXIT.completed;
  } finally {
    await rt.close();
  }
}
