import type { DirectoryEntry } from '../../bus/directory.js';
import type { PlanRecord } from '../../store/projection.js';
import { formatPlan } from '../../tools/builtins/update-plan.js';
import { EXIT } from '../exit-codes.js';
import { foldLog } from '../hand-off.js';
import type { Out } from '../output.js';
import type { Runtime } from '../runtime.js';
import { terminalText } from '../../client/terminal-text.js';
import { lineFor, type CommandLine } from '../hints.js';

/** The command that accepts an agent's plan, as the person would paste it. */
export function acceptCommand(line: CommandLine, agentId: string, ...more: string[]): string {
  return line('plan', agentId, '--accept', ...more);
}

/** A plan for a person: the version, one line a step with its status marker, the explanation. */
export function describePlan(plan: PlanRecord): string {
  // the steps are the model's text: their control characters are shown, not sent
  const body = formatPlan(plan).split('\n').map((l) => `  ${terminalText(l)}`).join('\n');
  return `plan version ${plan.version} · ${plan.items.filter((i) => i.status === 'completed').length}/${plan.items.length} done\n${body}\n`;
}

/**
 * What `run --plan-mode` does at the end of its turn: a turn that completed with a plan prints it
 * and how to accept it, and ends waiting for the person (exit 5); any other end keeps its code.
 */
export async function afterPlanTurn(rt: Runtime, entry: Pick<DirectoryEntry, 'actorId' | 'rootId'>, code: number, out: Out, json: boolean): Promise<number> {
  if (code !== EXIT.completed) return code;
  const p = await foldLog(rt, entry as DirectoryEntry);
  if (!p.plan) {
    out.stderr.write(`plan mode: ${entry.actorId} wrote no plan (update_plan); nothing to accept\n`);
    return code;
  }
  // `--json`: stdout stays the event stream, which holds the plan/replaced events
  if (!json && !out.quiet) out.stdout.write(`\n${describePlan(p.plan)}`);
  out.stderr.write(`plan mode: nothing was changed; accept the plan to carry it out: ${acceptCommand(lineFor(rt.config), entry.actorId)}\n`);
  return EXIT.waiting;
}
