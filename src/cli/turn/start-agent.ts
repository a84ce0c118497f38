import type { EffectiveConfig } from '../../config/config.js';
import { newId } from '../../protocol/ids.js';
import { emptyProjection } from '../../store/projection.js';
import { submitToHosts } from '../hand-off.js';
import { handOverLeftWork } from '../left-work.js';
import type { Out } from '../output.js';
import { taskMessage } from '../../client/messages.js';
import { RunPrinter } from '../run-printer.js';
import { createLogger, openRuntime } from '../runtime.js';
import { promptFor } from './approval-prompt.js';
import { followTurn } from './follow-turn.js';
import { afterPlanTurn } from './plan-review.js';
import { validateRun, type RunOptions } from './turn-flags.js';
import { failureOf, printsOnCommit } from './turn-hosting.js';

/**
 * A new agent on a task (`actorloop run`, `actorloop demo`): starts it and sends it the task
 * through its inbox. With a live host (`actorloop host`) it hands the agent over, creating its
 * directory entry and inbox without taking its lease, and follows its events; otherwise, or with `--in-process` or a fault spec
 * (meant for the process that hosts the agent), it hosts the agent here. Either way it prints the
 * same output and exits with the same code at the turn's end.
 */
export async function startAgent(
  task: string,
  opts: RunOptions,
  config: EffectiveConfig,
  out: Out,
  onAgent?: (agentId: string) => void,
): Promise<number> {
  const request = await validateRun(task, opts, config);
  const logger = createLogger(config);
  const rt = await openRuntime(config, logger);
  try {
    const json = opts.json === true;
    const printer = new RunPrinter(out, json);
    const actorId = newId('agent');
    const entry = {
      actorId,
      kind: 'agent' as const,
      parentId: null,
      rootId: actorId,
      // redacted before it is cut: a secret cut in two would no longer be recognised
      title: rt.tooling.redactor.redact(task.trim()).text.slice(0, 120),
      workspace: request.workspace,
      labels: {},
    };
    // the name every person's command gives itself (`send` too): anything else reads client:unknown
    const message = taskMessage(actorId, task, request);
    const handOff = opts.inProcess !== true && config.faults === null && (await rt.hosts.live(Date.now())).length > 0;
    // --quiet: stdout is the answer's alone
    (json || out.quiet ? out.stderr : out.stdout).write(`${actorId}\n`);
    onAgent?.(actorId);
    if (handOff) {
      const deadlineAt = request.deadlineSeconds === null ? null : Date.now() + request.deadlineSeconds * 1000;
      await submitToHosts(rt, entry, message);
      const code = await followTurn({
        rt, entry, from: emptyProjection(actorId), directory: rt.bus.directory, printer, out, json,
        prompt: promptFor(out, json), hosting: { kind: 'host', handedOver: true }, deadlineAt,
      });
      return request.planMode ? await afterPlanTurn(rt, entry, code, out, json) : code;
    }
    // hosted here, followed as a host's agent is: the same follower prints it and asks for approvals
    const echo = printsOnCommit(config);
    const supervisor = rt.supervisor({
      onCommit: (id, events) => {
        // the agent's own status is its follower's to record, the rest of its tree's is kept here
        if (id !== actorId) rt.statuses.committed(id, events);
        // the agent's own commits: its children hosted here have logs of their own
        if (echo && id === actorId) printer.commit(events);
      },
    });
    const actor = await supervisor.create(entry, { epoch: (await rt.pinNew(actorId)).epoch });
    const failed = failureOf(actor.whenTurnEnds());
    await supervisor.send(message);
    const code = await followTurn({
      rt, entry, from: emptyProjection(actorId), directory: rt.bus.directory, printer, out, json,
      prompt: promptFor(out, json), hosting: { kind: 'here', failed }, echo: !echo,
    });
    if (request.planMode) return await afterPlanTurn(rt, entry, code, out, json);
    await handOverLeftWork(rt, supervisor, { ...entry, status: 'running', createdAt: '', updatedAt: '' }, actor, out, code);
    return code;
  } finally {
    await rt.close();
  }
}
