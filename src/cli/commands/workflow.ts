import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Option, type Command } from 'commander';
import { ApprovalModeSchema, type ApprovalMode } from '../../protocol/turn-settings.js';
import { workflowRefusal } from '../../actors/effects/workflow-tools.js';
import { claimSubject } from '../../bus/subjects.js';
import { terminalText } from '../../client/terminal-text.js';
import { interruptMessage } from '../../client/messages.js';
import { publishInbox } from '../../bus/inbox.js';
import type { EffectiveConfig } from '../../config/config.js';
import { readWorkflowFile, type Workflow } from '../../jobs/workflow-file.js';
import { foldRunEvent, createRunState, foldRunLog, runNodes, type RunNodeView, type WorkflowRunState } from '../../jobs/workflow-state.js';
import { ConfigError, NotFoundError } from '../../protocol/errors.js';
import type { ActorEvent, EventData } from '../../protocol/events.js';
import { newId } from '../../protocol/ids.js';
import type { CommandKit } from '../command-kit.js';
import { EXIT } from '../exit-codes.js';
import { idArgument } from '../id-arguments.js';
import type { Out } from '../output.js';
import { createLogger, openRuntime, type Runtime } from '../runtime.js';
import { exitCodeForSignal, onStop, stopReceived } from '../stop-signals.js';
import { loadConfig } from '../../config/config.js';

// `actorloop workflow run <file>` and `actorloop workflow <runId>` (design §11b): a workflow run
// is an actor with its own log whose nodes run as jobs it owns. `run` validates the file before
// anything is written (a problem: exit 2, nothing started), then starts the run on a live host
// (its log's first event and its directory entry, then a claim request) or, with none, with
// `--in-process` or a fault spec, hosts it here; either way it follows the run's log and prints
// each node's moves until the run ends: exit 0 when it succeeded, 1 when it failed.

/** Options of `workflow run`. */
export interface WorkflowRunOptions {
  cwd?: string;
  /** The model its model nodes ask (default: the config's default model). */
  model?: string;
  json?: boolean;
  inProcess?: boolean;
  /** The run mode its shell nodes' commands are decided under (default: the config's `approval_mode`). */
  approve?: ApprovalMode;
}

/**
 * Adds `actorloop workflow run <file>` and `actorloop workflow <runId>` to the program: one
 * command whose first argument is `run` or a run's ID (a subcommand beside an argument would take
 * `--nats` and `--data-dir` for the parent, and run on another server).
 */
export function registerWorkflowCommand(program: Command, kit: CommandKit): Command {
  const { common, flags, act, out } = kit;
  return common(program.command('workflow').argument('<runId|run>', 'a run (wf_…) to show, or `run` to start one').argument('[file]', 'with run: the workflow file (.json or .toml)'))
    .description("`workflow run <file>`: validate a workflow file and run it (each node a job, started only once what it needs succeeded; exit 0 when the run succeeded, 1 when it failed); `workflow <runId>`: each node's status, attempt, outcome and job")
    .option('--cwd <dir>', 'with run: the workspace its shell nodes run in (default: the current directory)')
    .option('--json', 'with run: NDJSON of the run\'s events on stdout; else the run as one JSON object')
    .option('--in-process', 'with run: host the run in this process, not on a running host')
    .addOption(new Option('--approve <mode>', "with run: the run mode every shell node's command must be allowed under, unasked (default: the config's approval_mode); full-auto runs sandboxed commands").choices(ApprovalModeSchema.options))
    .option('--model <spec>', 'with run: the model its model nodes ask (default: the default model), e.g. scripted:<file.json>')
    .option('--fault <spec>', 'with run: inject a fault (testing): <point>[:<id>][@<n>][=kill|drop]')
    .option('--cancel', "with a run's ID: ask it to stop (no node starts after it, the running nodes' jobs are cancelled; it ends cancelled)")
    .action(act(async (target: string, file: string | undefined, o) => {
      if (target === 'run') {
        if (file === undefined) throw new ConfigError('cli.workflow', 'workflow run needs the workflow file', { hint: 'actorloop workflow run <file.json|file.toml>' });
        return workflowRunCommand(file, o, () => loadConfig(flags(o)), out);
      }
      if (file !== undefined) throw new ConfigError('cli.workflow', `workflow ${target} takes no file`, { hint: 'start a run with actorloop workflow run <file>; show one with actorloop workflow <runId>' });
      return workflowStatusCommand(idArgument('workflow')(target), o, loadConfig(flags(o)), out);
    }));
}

/** The workspace directory, absolute; a ConfigError when it is not one. */
async function workspaceOf(dir: string): Promise<string> {
  const ws = resolve(dir);
  const st = await stat(ws).catch(() => null);
  if (!st?.isDirectory()) throw new ConfigError('config.cwd', `workspace ${ws} is not a directory`, { hint: 'pass --cwd <an existing directory>' });
  return ws;
}

/** `actorloop workflow run <file>`: validates, starts the run (on a host, or here), follows it to its end. */
export async function workflowRunCommand(file: string, opts: WorkflowRunOptions, config: () => EffectiveConfig, out: Out): Promise<number> {
  // before anything is opened: a bad file starts nothing
  const workflow: Workflow = readWorkflowFile(file);
  const workspace = await workspaceOf(opts.cwd ?? '.');
  const cfg = config();
  const rt = await openRuntime(cfg, createLogger(cfg));
  try {
    // each node's command is decided as a shell call would be, before anything starts: a deny rule
    // holds inside a workflow, and a command that would ask needs a looser --approve or an allow rule
    const mode = opts.approve ?? cfg.approvalMode;
    const refused = workflowRefusal(workflow, cfg.policyRules, mode, {
      workspace, sandboxed: rt.tooling.bwrapPath !== null, untrustedContext: false,
    });
    if (refused) {
      throw new ConfigError('cli.workflow_refused', `${file}: ${refused}`, {
        hint: mode === 'full-auto' ? 'change the node, or the policy rule that stops it' : 'run it with --approve full-auto (sandboxed commands run unasked), or add an allow rule',
      });
    }
    const runId = newId('workflow');
    const spec = opts.model ?? cfg.defaultModel;
    const model = spec ? { spec, baseUrl: cfg.openaiBaseUrl } : null;
    const data: EventData<'workflow/created'> = { runId, name: workflow.name, workflow, ownerId: null, rootId: runId, cwd: workspace, workspace, model };
    const json = opts.json === true;
    (json ? out.stderr : out.stdout).write(`${runId}\n`);
    const handOff = opts.inProcess !== true && cfg.faults === null && (await rt.hosts.live(Date.now())).length > 0;
    const supervisor = rt.supervisor({ onCommit: (id, events) => rt.statuses.committed(id, events) });
    // handed off: the run is made known here (its log and entry) and a host takes its lease
    if (handOff) supervisor.setAdopter(async () => null);
    await supervisor.workflowPort.start(data);
    if (handOff) {
      rt.bus.nc.publish(claimSubject(runId));
      await rt.bus.nc.flush();
      out.stderr.write(`workflow ${workflow.name}: handed to a host\n`);
    }
    const state = await followRun(rt, runId, json, out);
    if (state === null) {
      const signal = stopReceived();
      return signal === null ? EXIT.interrupted : exitCodeForSignal(signal);
    }
    if (!handOff) await statusWritten(rt, runId);
    return state.ended?.outcome === 'succeeded' ? EXIT.completed : EXIT.failed;
  } finally {
    await rt.close();
  }
}

/** Waits (bounded) for the directory to show the run ended, so a host does not take it on after this command exits. */
async function statusWritten(rt: Runtime, runId: string): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const e = await rt.bus.directory.get(runId);
    if (e && e.status !== 'running') return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** One node's move, as a line for people. */
function moveLine(e: ActorEvent): string | null {
  switch (e.type) {
    case 'node/started':
      return `${e.data.node}: started (attempt ${e.data.attempt}, ${e.data.jobId})`;
    case 'node/ended':
      return `${e.data.node}: ${e.data.outcome}${e.data.error ? ` · ${terminalText(e.data.error)}` : ''}`;
    case 'workflow/ended':
      return `workflow ${e.data.outcome}${e.data.failed.length > 0 ? `: ${e.data.failed.join(', ')} failed` : ''}`;
    default:
      return null;
  }
}

/** Follows a run's log until `workflow/ended`; the state it ended in, or null when the person stopped following first. */
async function followRun(rt: Runtime, runId: string, json: boolean, out: Out): Promise<WorkflowRunState | null> {
  const stop = new AbortController();
  const onSigint = (): void => stop.abort();
  process.once('SIGINT', onSigint);
  const offStop = onStop(() => stop.abort());
  let state: WorkflowRunState | null = null;
  try {
    for await (const { event } of rt.reader.follow(runId, runId, { afterSeq: 0, signal: stop.signal })) {
      if (json) out.stdout.write(`${JSON.stringify(event)}\n`);
      if (state === null) {
        if (event.type === 'workflow/created') state = createRunState(event);
        continue;
      }
      foldRunEvent(state, event);
      const line = json ? null : moveLine(event);
      if (line !== null) out.stderr.write(`${line}\n`);
      if (state.ended) break;
    }
  } finally {
    process.off('SIGINT', onSigint);
    offStop();
    stop.abort();
  }
  return state?.ended ? state : null;
}

/** A run's status as one JSON object. */
export interface WorkflowRunView {
  runId: string;
  name: string;
  ownerId: string | null;
  cwd: string;
  status: 'running' | 'succeeded' | 'failed' | 'cancelled';
  failed: string[];
  nodes: RunNodeView[];
}

/** The view of a run from its state. */
export function workflowRunView(s: WorkflowRunState): WorkflowRunView {
  return {
    runId: s.created.runId, name: s.created.name, ownerId: s.created.ownerId, cwd: s.created.cwd,
    status: s.ended?.outcome ?? 'running', failed: s.ended?.failed ?? [], nodes: runNodes(s),
  };
}

/** `actorloop workflow <runId> [--json]`: each node's status, attempt, outcome and job, from the run's log. */
export async function workflowStatusCommand(runId: string, opts: { json?: boolean; cancel?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  const rt = await openRuntime(config, createLogger(config), { role: 'client' });
  try {
    const entry = await rt.bus.directory.get(runId);
    if (!entry || entry.kind !== 'workflow') {
      throw new NotFoundError('workflow.not_found', `no workflow run ${runId} in this data dir`, { hint: 'pass the ID `actorloop workflow run` printed, with the same --data-dir and --nats' });
    }
    const events: ActorEvent[] = [];
    for await (const { event } of rt.reader.read(entry.rootId, runId, { afterSeq: 0 })) events.push(event);
    const s = foldRunLog(events);
    if (!s) throw new NotFoundError('workflow.not_found', `${runId} has no workflow/created in its log yet`, { hint: 'look again in a moment' });
    if (opts.cancel === true) {
      if (s.ended) {
        out.stderr.write(`${runId} already ended ${s.ended.outcome}: nothing to cancel\n`);
        return EXIT.completed;
      }
      const msg = interruptMessage(runId);
      await publishInbox(await rt.bus.person(), msg, 'person');
      (opts.json ? out.stderr : out.stdout).write(`cancel sent to ${runId} (${msg.id}): no node starts after it, and the running nodes' jobs are stopped\n`);
      if (!opts.json) return EXIT.completed;
    }
    const v = workflowRunView(s);
    if (opts.json) {
      out.stdout.write(`${JSON.stringify(v)}\n`);
      return EXIT.completed;
    }
    const width = Math.max(...v.nodes.map((n) => n.id.length));
    const lines = [
      `${v.runId}  ${terminalText(v.name)}  ${v.status}${v.failed.length > 0 ? ` (failed: ${v.failed.join(', ')})` : ''}`,
      ...v.nodes.map((n) => `  ${n.id.padEnd(width)}  ${n.run.padEnd(5)}  ${n.status.padEnd(9)}  attempt ${n.attempt}  ${n.jobId ?? '-'}${n.error ? `  ${terminalText(n.error)}` : ''}`),
    ];
    out.stdout.write(`${lines.join('\n')}\n`);
    return EXIT.completed;
  } finally {
    await rt.close();
  }
}
