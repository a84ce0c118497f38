import { requestFromSettings } from '../../actors/agent/plan-mode.js';
import type { EffectiveConfig } from '../../config/config.js';
import { ConfigError } from '../../protocol/errors.js';
import type { TurnRequest, TurnSettings } from '../../protocol/events.js';
import type { Projection } from '../../store/projection.js';
import { entryOf, foldLog, inboxPending, latestAgent, placementOf, releaseToHosts } from '../hand-off.js';
import { type Out } from '../output.js';
import { RunPrinter } from '../run-printer.js';
import { sendAsPerson } from '../person-messages.js';
import { createLogger, openRuntime } from '../runtime.js';
import { terminalText } from '../terminal-text.js';
import { cliLine, placeholder } from '../hints.js';
import { nextTaskMessage } from '../../client/messages.js';
import { followTurn } from './follow-turn.js';
import { handOverLeftWork } from '../left-work.js';
import { afterPlanTurn } from './plan.js';
import { awaitHosted, hostExisting, promptFor } from './resume.js';
import { checkCompletion, checkModel, checkPriced, checkTask, completionRequest, configSnapshot, goalOfFlags, settingsOfFlags, type RunOptions } from './run.js';

// A conversation is one agent over many turns (design §6a: a follow-up starts the next turn with
// the history so far). `run --continue <agent>` and `run --last` send the next task as a
// follow-up through the agent's inbox, with the settings of its last turn and this command's flags
// over them, and follow the turn that takes it.

/**
 * The request of the next turn: the last turn's settings (plan mode kept, no deadline), with what
 * this command says over them — its flags, and the `-c` overrides of the settings a turn records
 * (run mode, instructions, model: the person's word for this command, as a flag is) — and the
 * config this command runs with recorded.
 */
export async function continueRequest(opts: RunOptions, config: EffectiveConfig, last: TurnSettings): Promise<TurnRequest> {
  const base = requestFromSettings(last);
  const flags = await settingsOfFlags(opts);
  const said = (key: string): boolean => config.sources[key] === 'flag';
  const spec = opts.model ?? (said('model') ? config.defaultModel ?? undefined : undefined);
  const baseUrl = opts.baseUrl ?? (said('base_url') ? config.openaiBaseUrl : base.baseUrl);
  // a model or an endpoint named now is checked as `run` checks it; the last turn's are as recorded
  const model = spec !== undefined || baseUrl !== base.baseUrl ? await checkModel(spec ?? base.model, baseUrl, config) : base.model;
  // a goal started now brings its tools to the tool list the last turn recorded (resolveSettings)
  const goal = goalOfFlags(opts, config);
  const request: TurnRequest = {
    ...base,
    ...(said('approval_mode') ? { approvalMode: config.approvalMode } : {}),
    ...(said('instructions') && config.instructions !== null ? { instructions: config.instructions } : {}),
    // the turn records what the completion limit does: `-c` says it again for this turn, either way
    ...(said('on_completion_exhausted') ? { onCompletionExhausted: config.onCompletionExhausted } : {}),
    ...flags,
    ...(goal ? { goal } : {}),
    model,
    baseUrl,
    config: configSnapshot(config),
  };
  checkPriced(request.model, request.maxCostUsd, config);
  checkPriced(request.model, goal?.budget.costUsd, config, '--goal-cost');
  // a policy named now takes the verify commands this command's config names
  if (flags.completeWhen !== undefined) Object.assign(request, completionRequest(flags, config));
  checkCompletion(request);
  return request;
}

/** Where `--continue` / `--last` point. */
export interface ContinueTarget {
  agentId?: string;
  last?: boolean;
}

/**
 * `actorloop run --continue <agent> "<task>"` (or `--last`): the next turn of an existing agent,
 * with its history. The task goes to the agent's inbox on the person channel; an agent in a turn
 * takes it as a follow-up when that turn ends. Then the command follows the agent as `run` does (on
 * the host that holds it, on a live host it is handed to, or hosting it here) until the turn that
 * took the task ends, and exits with that turn's code.
 */
export async function continueCommand(target: ContinueTarget, task: string, opts: RunOptions, config: EffectiveConfig, out: Out): Promise<number> {
  checkTask(task);
  if (target.agentId !== undefined && target.last) {
    throw new ConfigError('cli.continue_last', '--continue <agent> and --last name the agent twice', { hint: 'pass one of them' });
  }
  const rt = await openRuntime(config, createLogger(config));
  try {
    const json = opts.json === true;
    const entry = target.agentId !== undefined ? await entryOf(rt, target.agentId) : await latestAgent(rt, opts.cwd ?? '.');
    const agentId = entry.actorId;
    const p = await foldLog(rt, entry);
    if (!p.lastSettings) {
      const onItsWay = p.openTurn !== null || (await inboxPending(rt, agentId)) > 0;
      throw new ConfigError('cli.no_settings', `${agentId} has run no turn yet, so there is nothing to continue`, {
        hint: onItsWay ? `its first task is on its way: ${cliLine(config, 'resume', agentId)} follows it` : `start an agent with ${cliLine(config, 'run', placeholder('"<task>"'))}`,
      });
    }
    const request = await continueRequest(opts, config, p.lastSettings);
    const msg = nextTaskMessage(agentId, task, request, p.openTurn !== null);
    const place = await placementOf(rt, agentId);
    const here = opts.inProcess === true || config.faults !== null;
    let elsewhere = place.kind === 'host' || place.kind === 'other' || (place.kind === 'free' && place.hosts.length > 0 && !here);
    if (place.kind === 'other' && here) {
      // another command hosts it: the task is mail it takes, and this command follows it there
      out.stderr.write(`${agentId} is hosted by another command; following it there\n`);
    }
    if (elsewhere && place.kind === 'free') await releaseToHosts(rt, entry);
    // The lease before the mail: a live host claims an agent with mail waiting, so a task sent
    // first could be taken there while this command finds the lease gone and says nothing ran.
    // One that is taken anyway (a host got it in between) is followed there: the task still runs.
    const hosted = elsewhere ? null : await hostExisting(agentId, rt, out, json).catch((err: unknown) => {
      if (!(err instanceof ConfigError) || err.code !== 'cli.hosted_elsewhere') throw err;
      elsewhere = true;
      return null;
    });
    await sendAsPerson(rt, msg);
    // --quiet: stdout is the answer's alone
    (json || out.quiet ? out.stderr : out.stdout).write(`${agentId}\n`);
    out.stderr.write(`${terminalText(continuing(p))}\n`);
    if (elsewhere && here && place.kind === 'free') out.stderr.write(`${agentId} was taken by a host; following it there\n`);
    const follow = (from: Projection): Promise<number> =>
      hosted
        ? awaitHosted(hosted, entry, from, json, out)
        : followTurn({
            rt, entry, from, directory: rt.bus.directory, printer: new RunPrinter(out, json), out, json,
            prompt: promptFor(out, json), hosting: { kind: 'host', handedOver: place.kind === 'free' },
          });
    let code: number;
    for (;;) {
      const before = p.lastTurn?.id ?? null;
      code = await follow(p);
      // the follower returns at a turn's end, or when the person left or must answer: only a turn
      // that ended without taking the task (one running when it came) is followed past
      const ended = (p.lastTurn?.id ?? null) !== before;
      // (the log may not hold the task yet when that turn ends: received, it is pending)
      const state = p.inbox[msg.id]?.state;
      if (!ended || (state !== undefined && state !== 'pending')) break;
    }
    if (request.planMode) return await afterPlanTurn(rt, entry, code, out, json);
    if (hosted) await handOverLeftWork(rt, hosted.supervisor, entry, hosted.actor, out, code);
    return code;
  } finally {
    await rt.close();
  }
}

/** What the person is told on stderr: which turn this is, or that it waits for the running one. */
function continuing(p: Projection): string {
  const turn = p.turns + 1;
  if (p.openTurn) return `${p.actorId} is in turn ${turn}: this task is queued as a follow-up and starts turn ${turn + 1} when that one ends`;
  const last = p.lastTurn ? `; turn ${p.turns} ended ${p.lastTurn.outcome}${p.lastTurn.reason ? ` (${p.lastTurn.reason})` : ''}` : '';
  return `continuing ${p.actorId}: turn ${turn}, with the history so far${last}`;
}
