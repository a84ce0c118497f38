import type { ActorEvent } from '../../protocol/events.js';
import { formatViolations, isJobLog } from '../../verify/verify.js';
import { treeOk, verifyTree } from '../../verify/tree.js';
import type { LogReader } from '../../store/log-port.js';
import type { TreeLimits } from '../../protocol/turn-settings.js';
import { EXIT } from '../exit-codes.js';
import type { Out } from '../output.js';
import { terminalText } from '../../client/terminal-text.js';

/**
 * `actorloop verify <agent> --tree`: every log of the agent's tree, each against the invariants of
 * its own and the tree against those that link them; exit 1 on any violation. A tree still
 * running passes what it has so far, and says it runs. `limits`: the config's tree limits, checked
 * with those the root's turns recorded (the stricter).
 */
export async function verifyTreeCommand(
  reader: Pick<LogReader, 'readTree'>, rootId: string, opts: { json?: boolean }, out: Out, limits?: Partial<TreeLimits>,
): Promise<number> {
  const logs = new Map<string, ActorEvent[]>();
  // the tree's one order (its commits' stream sequences) times the children's lifetimes, whatever the hosts' clocks say
  const order = new Map<string, Map<number, number>>();
  for await (const { actorId, event, streamSeq } of reader.readTree(rootId)) {
    const log = logs.get(actorId) ?? [];
    log.push(event);
    logs.set(actorId, log);
    const at = order.get(actorId) ?? new Map<number, number>();
    at.set(event.seq, streamSeq);
    order.set(actorId, at);
  }
  // each log in seq order: the tree's stream order is commit order, which keeps each actor's
  for (const log of logs.values()) log.sort((a, b) => a.seq - b.seq);
  const v = verifyTree(logs, rootId, { order, ...(limits ? { limits } : {}) });
  const names = new Map<string, string>([[rootId, 'main']]);
  const jobs = new Set<string>();
  for (const [actorId, log] of logs) {
    // a job's log names it in its first event
    const first = log[0];
    if (isJobLog(log) && first?.type === 'job/created') {
      names.set(actorId, first.data.name);
      jobs.add(actorId);
    }
    for (const e of log) if (e.type === 'subagent/spawn_requested') names.set(e.data.childId, e.data.name);
  }
  const ok = treeOk(v);
  if (opts.json) {
    const actors = v.actors.map((a) => ({ ...a, name: names.get(a.actorId) ?? null, kind: jobs.has(a.actorId) ? 'job' : 'agent', ok: a.violations.length === 0 }));
    out.stdout.write(`${JSON.stringify({ rootId, ok, running: v.running, actors, tree: v.tree })}\n`);
    return ok ? EXIT.completed : EXIT.failed;
  }
  const agents = v.actors.length - jobs.size;
  const lines = [`tree ${rootId}: ${agents} agent(s)${jobs.size > 0 ? `, ${jobs.size} job(s)` : ''}, ${v.actors.reduce((n, a) => n + a.events, 0)} events`];
  for (const a of v.actors) {
    const who = `${a.actorId} (${jobs.has(a.actorId) ? 'job ' : ''}${terminalText(names.get(a.actorId) ?? '?')})`;
    lines.push(a.violations.length === 0
      ? `  ${who}: ${a.events} events, all invariants hold`
      : `  ${who}: ${a.violations.length} violation(s) in ${a.events} events\n${terminalText(formatViolations(a.violations), 'block').replace(/^/gm, '    ')}`);
  }
  if (v.tree.length === 0) lines.push(`  tree: every spawn, notice, permission and budget holds${jobs.size > 0 ? ', and every job has its owner' : ''}`);
  else {
    lines.push(`  tree: ${v.tree.length} violation(s)`);
    for (const t of v.tree) lines.push(terminalText(`    ${t.actorId} seq ${t.seq ?? '-'}: ${t.code}: ${t.message}`, 'block'));
  }
  if (v.running.length > 0) {
    lines.push(`  still running (the checks that need an end wait for it): ${terminalText(v.running.join('; '), 'block')}`);
  }
  out.stdout.write(`${lines.join('\n')}\n`);
  return ok ? EXIT.completed : EXIT.failed;
}
