import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { debugEnabled, loadConfig, type ConfigFlags, type EffectiveConfig } from '../config/config.js';
import { trustCommand } from './commands/trust.js';
import { configShowCommand } from './commands/config-show.js';
import { ActorloopError, BusError, ConfigError, NotFoundError } from '../protocol/errors.js';
import { demoCommand, demoScenarioOf, investigatorsDemoCommand } from './commands/demo.js';
import { doctorCommand } from './commands/doctor.js';
import { eventsCommand, verifyCommand } from './commands/inspect.js';
import { RUNS_DEFAULT_LIMIT, runsCommand } from './commands/runs.js';
import { answerCommand, interruptCommand, resumeCommand } from './commands/resume.js';
import { goalCommand } from './commands/goal.js';
import { ApprovalModeSchema } from '../protocol/events.js';
import { runCommand } from './commands/run.js';
import { planCommand } from './commands/plan.js';
import { sendCommand } from './commands/send.js';
import { compactCommand } from './commands/compact.js';
import { remoteAnswerCommand, remoteApproveCommand, remoteEventsCommand, remoteCompactCommand, remoteInterruptCommand, remoteRunCommand, remoteSendCommand, remoteTreeCommand } from './commands/remote.js';
import { answerQuestionCommand } from './commands/answer.js';
import { hostCommand } from './commands/host.js';
import { serveCommand } from './commands/serve.js';
import { registerDlqCommand } from './commands/dlq.js';
import { registerWorkflowCommand } from './commands/workflow.js';
import { registerApprovalsCommand } from './commands/pending-approvals.js';
import { registerGcCommand } from './commands/gc.js';
import { registerMemoryCommand } from './commands/memory.js';
import { registerContextCommand } from './commands/context.js';
import { treeCommand } from './commands/tree.js';
import { jobsCommand } from './commands/jobs.js';
import { jobCommand } from './commands/job.js';
import { chaosCommand } from './commands/chaos.js';
import { EXIT } from './exit-codes.js';
import { idArgument } from './id-arguments.js';
import type { Out } from './output.js';
import { terminalText } from '../client/terminal-text.js';
import { catchStopSignals, exitCodeForSignal, stopReceived } from './stop-signals.js';

// `min` matches the schema the value lands in: a turn needs a step (TurnRequest.maxSteps is
// positive), while zero tool calls and `--after 0` are meaningful.
function wholeNumber(name: string, min: 0 | 1) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isInteger(n) || n < min) {
      throw new InvalidArgumentError(`${name} takes a whole number${min > 0 ? ` of at least ${min}` : ''}, got "${value}"`);
    }
    return n;
  };
}

// commander's way to take an option more than once: each value is added to the list
function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

// a job's log is an actor's: `events` and `verify` read it by its ID as they read an agent's
function agentOrJob(text: string): string {
  if (text.startsWith('wf_')) return idArgument('workflow')(text);
  return text.startsWith('job_') ? idArgument('job')(text) : idArgument('agent')(text);
}

function positiveNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`--deadline takes seconds (a number above 0), got "${value}"`);
  return n;
}

/**
 * Maps an error to its exit code and one line for a person; no stack for a user's mistake. A
 * message may quote a model's or a tool's text: its control characters are shown, not sent.
 */
export function reportError(err: unknown, out: Out, debug: boolean): number {
  if (err instanceof ActorloopError) {
    out.stderr.write(`actorloop: ${terminalText(err.userMessage(), 'block')}\n`);
    if (debug && err.cause) out.stderr.write(`${terminalText(String((err.cause as Error).stack ?? err.cause), 'block')}\n`);
    if (err instanceof ConfigError) return EXIT.usage;
    if (err instanceof NotFoundError) return EXIT.notFound;
    if (err instanceof BusError && ['bus.nats_server_missing', 'bus.unreachable', 'bus.auth_failed', 'bus.creds_unreadable'].includes(err.code)) return EXIT.usage;
    return EXIT.failed;
  }
  out.stderr.write(`actorloop: unexpected error: ${terminalText((err as Error)?.message ?? String(err), 'block')}\n`);
  if (debug) out.stderr.write(`${terminalText((err as Error)?.stack ?? '', 'block')}\n`);
  out.stderr.write('this is a bug in actorloop; run again with ACTORLOOP_LOG=debug for details\n');
  return EXIT.failed;
}

/**
 * Builds the `actorloop` command; `run` resolves with the exit code. `ownsStopSignals` is called
 * by a command whose own code answers SIGTERM / SIGHUP (a host drains and exits 0).
 */
export function buildProgram(out: Out, setCode: (code: number) => void, ownsStopSignals: () => void = () => {}): Command {
  const program = new Command('actorloop')
    .description('A durable, actor-based runtime for LLM agents')
    .version('0.1.0')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => out.stdout.write(s),
      writeErr: (s) => out.stderr.write(s),
      outputError: (s, write) => write(`actorloop: ${s.replace(/^error: /, '')}`),
    })
    .showSuggestionAfterError(true);

  const common = (cmd: Command): Command =>
    cmd
      .option('--data-dir <dir>', 'where logs, snapshots and the embedded server live (default: ACTORLOOP_DATA_DIR, else a per-user dir)')
      .option('--nats <url>', 'a NATS server with JetStream (default: NATS_URL, else an embedded nats-server)')
      .option('-c, --config <key=value>', 'set a config-file key for this command (repeatable; the value is TOML, else a string): -c approval_mode=deny-all', collect, []);
  const flags = (o: { dataDir?: string; nats?: string; fault?: string; cwd?: string; config?: string[] }): ConfigFlags => {
    const f: ConfigFlags = {};
    // the workspace's actorloop.toml is read from --cwd when a command has one
    if (o.cwd !== undefined) f.cwd = o.cwd;
    if (o.dataDir !== undefined) f.dataDir = o.dataDir;
    if (o.nats !== undefined) f.nats = o.nats;
    if (o.fault !== undefined) f.fault = o.fault;
    if (o.config !== undefined && o.config.length > 0) f.overrides = o.config;
    return f;
  };
  // --gateway: the command drives a remote runtime through `actorloop serve`, opening no bus or store
  const remote = (cmd: Command): Command =>
    cmd
      .option('--gateway <url>', 'drive the runtime behind this gateway (`actorloop serve`, e.g. http://127.0.0.1:7420): no NATS, no LMDB here')
      .option('--gateway-token-file <file>', "with --gateway: a file holding the gateway's bearer token (its first line)");
  // The workspace file's keys that did not count are named once per command, on stderr, when
  // the command is done: a command's first line (the agent ID of `run`) stays its first.
  const ignored = new Set<string>();
  const load = (o: { dataDir?: string; nats?: string; fault?: string; cwd?: string; config?: string[] }): EffectiveConfig => {
    const config = loadConfig(flags(o));
    for (const note of config.ignoredKeys) ignored.add(note);
    return config;
  };
  // `--quiet` (commands that follow a turn): stdout gets the answer alone
  const quietOption = (): Option =>
    new Option('--quiet', 'print only the answer on stdout (errors and what the turn waits for: stderr)').conflicts('json');
  const outFor = (o: { quiet?: boolean }): Out => (o.quiet ? { ...out, quiet: true } : out);
  const act = <A extends unknown[]>(fn: (...args: A) => Promise<number>) =>
    async (...args: A): Promise<void> => {
      try {
        setCode(await fn(...args));
      } finally {
        for (const note of ignored) out.stderr.write(`actorloop: ignored ${terminalText(note, 'line')}\n`);
        ignored.clear();
      }
    };

  remote(common(program.command('run').argument('<task>', 'what the agent should do')))
    .description('start an agent on a task: hand it to a running host and follow it, else host it here, until the turn ends')
    .option('--model <spec>', 'scripted:<file.json> or openai:<model> (default with OPENAI_API_KEY: openai:gpt-4.1-mini)')
    .option('--base-url <url>', 'an OpenAI-compatible endpoint for openai: models (default: OPENAI_BASE_URL)')
    .option('--output-schema <file.json>', 'a JSON Schema the final answer must match (structured output)')
    .option('--effort <level>', 'reasoning effort for models that take one: minimal, low, medium, high')
    .option('--max-output-tokens <n>', 'the most tokens one model answer may have', wholeNumber('--max-output-tokens', 1))
    .option('--cwd <dir>', 'the workspace the tools work in (default: the current directory)')
    .option('--json', 'print only NDJSON events on stdout')
    .option('--max-steps <n>', 'stop the turn after n steps', wholeNumber('--max-steps', 1))
    .option('--max-tool-calls <n>', 'stop the turn after n tool calls', wholeNumber('--max-tool-calls', 0))
    .option('--deadline <seconds>', 'stop the turn after this many seconds', positiveNumber)
    .option('--max-tokens <n>', 'stop the turn before an attempt whose worst case (input + output cap) would pass n tokens in all')
    .option('--max-cost <usd>', "stop the turn before an attempt whose worst case would pass this many US dollars in all (needs the model's price)")
    .option('--tools <names>', 'comma-separated tools the model may see (default: all)')
    .option('--instructions <file>', "a file holding the system prompt (default: the config's `instructions`, else a built-in one)")
    .option('--complete-when <policy>', "when a final answer completes the turn: answer (default), code-change (a passing verify_commands run after the last change), cited (every [citation] was retrieved)")
    .addOption(
      new Option('--approve <mode>', 'what may run without asking: ask (reads only), auto-edit (+ workspace edits), full-auto (+ sandboxed shell), deny-all')
        .choices(ApprovalModeSchema.options),
    )
    .option('--continue <agentId>', "the task is this agent's next turn, with its history (a conversation)", idArgument('agent'))
    .option('--last', 'the task is the next turn of the latest agent of this workspace (--cwd) and data dir')
    .option('--in-process', 'host the agent in this process even when a host is running')
    .option('--plan-mode', 'run read-only: the agent explores and writes a plan (update_plan), then exits 5 for you to accept it')
    .option('--goal <objective>', 'a goal that outlives the turn: while it is active and turns make progress, the agent goes on in new turns')
    .option('--goal-tokens <n>', "the goal's token budget over all its turns")
    .option('--goal-cost <usd>', "the goal's cost budget in USD over all its turns")
    .option('--goal-seconds <s>', "the goal's time budget: seconds of its turns while it is active")
    .addOption(new Option('--fault <spec>', 'inject a fault here (the agent is then hosted in this process): <point>[:<agentId>][@<n>][=kill|drop]'))
    .addOption(quietOption())
    .action(act(async (task: string, o) => (o.gateway ? remoteRunCommand(task, o, load(o), outFor(o)) : runCommand(task, o, load(o), outFor(o)))));

  common(program.command('plan').argument('<agentId>', 'the agent', idArgument('agent')))
    .description("show an agent's plan; --accept starts its next turn in normal mode with the plan pinned, and follows it")
    .option('--accept', 'carry the plan out: a new turn with the last turn\'s settings, not in plan mode, the plan as its message')
    .option('--json', 'the plan record (null: none yet); with --accept, NDJSON events')
    .option('--in-process', 'with --accept: host the agent in this process, not on a running host')
    .addOption(quietOption())
    .action(act(async (id: string, o) => planCommand(id, o, load(o), outFor(o))));

  remote(common(program.command('approve').argument('<agentId>', 'the agent', idArgument('agent')).argument('<approvalId>', 'the approval (apr_…)', idArgument('approval'))))
    .description('approve a pending tool call and follow (or host) the agent to the end of its turn')
    .option('--always', 'also allow this exact plan (tool and arguments) again for this agent without asking')
    .option('--json', 'print only NDJSON events on stdout')
    .option('--in-process', 'host the agent in this process, not on a running host')
    .addOption(new Option('--fault <spec>', 'inject a fault').hideHelp())
    .addOption(quietOption())
    .action(act(async (id: string, apr: string, o) =>
      (o.gateway ? remoteApproveCommand(id, apr, 'approve', o, load(o), outFor(o)) : answerCommand(id, apr, 'approve', o, load(o), outFor(o)))));

  remote(common(program.command('deny').argument('<agentId>', 'the agent', idArgument('agent')).argument('<approvalId>', 'the approval (apr_…)', idArgument('approval'))))
    .description('deny a pending tool call (the model is told why) and follow (or host) the agent to the end of its turn')
    .option('--reason <text>', 'why, for the model')
    .option('--json', 'print only NDJSON events on stdout')
    .option('--in-process', 'host the agent in this process, not on a running host')
    .addOption(new Option('--fault <spec>', 'inject a fault').hideHelp())
    .addOption(quietOption())
    .action(act(async (id: string, apr: string, o) =>
      (o.gateway ? remoteApproveCommand(id, apr, 'deny', o, load(o), outFor(o)) : answerCommand(id, apr, 'deny', o, load(o), outFor(o)))));

  remote(common(program.command('answer').argument('<agentId>', 'the agent', idArgument('agent')).argument('<questionId>', 'the question (q_…)', idArgument('question')).argument('[text]', "the answer in your own words (where the question takes them)")))
    .description("answer an agent's question (ask_user) and follow (or host) the agent to the end of its turn")
    .option('--option <id>', 'answer by picking one of the options the question offers')
    .option('--json', 'print only NDJSON events on stdout')
    .option('--in-process', 'host the agent in this process, not on a running host')
    .addOption(new Option('--fault <spec>', 'inject a fault').hideHelp())
    .addOption(quietOption())
    .action(act(async (id: string, qid: string, text: string | undefined, o) =>
      (o.gateway ? remoteAnswerCommand(id, qid, text, o, load(o), outFor(o)) : answerQuestionCommand(id, qid, text, o, load(o), outFor(o)))));

  common(program.command('resume').argument('[agentId]', 'the agent (or --last)', idArgument('agent')))
    .description('finish an agent\'s turn: follow it on the host that runs it, hand it to a running host, or rehydrate it here')
    .option('--last', 'the latest agent of this workspace (--cwd) and data dir')
    .option('--cwd <dir>', 'with --last: the workspace (default: the current directory)')
    .option('--json', 'print only NDJSON events on stdout')
    .option('--in-process', 'rehydrate and host the agent in this process even when a host is running')
    .addOption(new Option('--fault <spec>', 'inject a fault').hideHelp())
    .addOption(quietOption())
    .action(act(async (id: string | undefined, o) => resumeCommand(id, o, load(o), outFor(o))));

  common(program.command('goal').argument('<agentId>', 'the agent', idArgument('agent')).argument('[action]', 'pause, resume or cancel the goal (a person\'s change); none: show it'))
    .description("show an agent's goal (objective, phase, revision, what it spent), or pause, resume or cancel it")
    .option('--json', 'the goal record as JSON')
    .option('--in-process', 'with an action: change it in this process when no host holds the agent, even with hosts running')
    .action(act(async (id: string, action: string | undefined, o) => goalCommand(id, action, o, load(o), out)));

  remote(common(program.command('interrupt').argument('<agentId>', 'the agent', idArgument('agent'))))
    .description("interrupt the agent's open turn wherever it runs: the turn ends cancelled (exit 0); nothing open: says so")
    .option('--json', 'print only NDJSON events on stdout')
    .option('--in-process', 'carry the interrupt out in this process when no host holds the agent, even with hosts running')
    .action(act(async (id: string, o) => (o.gateway ? remoteInterruptCommand(id, o, load(o), out) : interruptCommand(id, o, load(o), out))));

  remote(common(program.command('compact').argument('<agentId>', 'the agent', idArgument('agent'))))
    .description('ask the agent to compact its closed steps into a checkpoint at its next step boundary, whether or not its request fits')
    .option('--json', 'print the message ID as JSON')
    .action(act(async (id: string, o) => (o.gateway ? remoteCompactCommand(id, o, load(o), out) : compactCommand(id, o, load(o), out))));

  remote(common(program.command('send').argument('<agentId>', 'the agent', idArgument('agent')).argument('<text>', 'what the agent should know; - reads it from stdin')))
    .description("send a person's message to an agent: a steer while a turn runs, else a new turn; then follow it to its next turn end")
    .addOption(new Option('--steer', 'into the running turn at its next step (default while a turn runs)').conflicts(['inject', 'followUp']))
    .addOption(new Option('--inject', 'context for the next step, waking nobody: it never starts a turn').conflicts(['steer', 'followUp']))
    .addOption(new Option('--follow-up', 'a turn of its own once the running one ends (or now, when idle)').conflicts(['steer', 'inject']))
    .option('--no-follow', 'return once the inbox has the message, without following the turn')
    .option('--json', 'print only NDJSON events on stdout')
    .option('--in-process', 'host the agent here when no host holds it, even with hosts running')
    .addOption(quietOption())
    .action(act(async (id: string, text: string, o) =>
      (o.gateway ? remoteSendCommand(id, text, o, load(o), outFor(o)) : sendCommand(id, text, o, load(o), outFor(o)))));

  common(program.command('host'))
    .description('host agents until SIGTERM: claim leases for agents with work, run them, renew, drain on exit')
    .option('--name <name>', 'this host in leases (default: hostname:pid)')
    .option('--lease-ttl <ms>', 'lease time to live; a dead host\'s agents move after it (default 10000)', wholeNumber('--lease-ttl', 1))
    .option('--json', 'print the events of hosted agents as NDJSON on stdout')
    .addOption(new Option('--fault <spec>', 'inject a fault: <point>[:<agentId>][@<n>][=kill|drop]'))
    .option('--allow-faults', "take fault orders (a gateway's fault.kill): SIGKILL this process at a named point, or now")
    .action(act(async (o) => {
      ownsStopSignals();
      return hostCommand(o, load(o), out);
    }));

  common(program.command('serve'))
    .description('the gateway: an HTTP + WebSocket server over this bus (the protocol /v1 and the page); until SIGTERM or Ctrl-C')
    .option('--port <n>', 'the port (default 7420; 0: any free one)', wholeNumber('--port', 0))
    .option('--host <address>', 'the address to bind (default 127.0.0.1)')
    .option('--token-file <file>', "a file holding the bearer token every request must carry (default: the data dir's gateway/token, made on first start)")
    .option('--no-auth', 'loopback only: answer any local connection without the token (any user of this machine could then run tasks as you)')
    .option('--allow-looser-policy', "let clients ask for a looser run mode (turn.submit's approve) than this config's approval_mode")
    .option('--allow-faults', 'let clients kill the host process of an actor (fault.kill)')
    .option('--cors-origin <origin>', 'an origin besides its own that may call it from a browser (repeatable)', collect, [])
    .action(act(async (o) => {
      ownsStopSignals();
      // commander keeps `--no-auth` as `auth: false`
      return serveCommand({ ...o, noAuth: o.auth === false }, load(o), out);
    }));

  remote(common(program.command('events').argument('<agentId>', 'the agent (or a job: job_…)', agentOrJob)))
    .description("print an agent's event log")
    .option('--after <seq>', 'only events after this sequence', wholeNumber('--after', 0))
    .option('--follow', 'keep printing new events until Ctrl-C')
    .option('--json', 'NDJSON, one event per line')
    .option('--tree', 'every log of its tree in the order committed, each line led by the agent\'s name')
    .action(act(async (id: string, o) => (o.gateway ? remoteEventsCommand(id, o, load(o), out) : eventsCommand(id, o, load(o), out))));

  common(program.command('runs'))
    .description('list the agents of this data dir, newest first: status, turns, workspace, last task')
    .option('--limit <n>', `how many to list (default ${RUNS_DEFAULT_LIMIT}; with --json: all)`, wholeNumber('--limit', 1))
    .option('--json', 'NDJSON, one agent per line')
    .action(act(async (o) => runsCommand(o, load(o), out)));

  common(program.command('jobs').argument('[agentId]', 'the agent whose jobs to list (default: every tree of this data dir)', idArgument('agent')))
    .description("list background jobs (an agent's start_job): ID, name, phase (queued #N while it waits), attempts, exit, duration, owner")
    .option('--json', 'one JSON array of the jobs')
    .action(act(async (id: string | undefined, o) => jobsCommand(id, o, load(o), out)));

  common(program.command('job').argument('<jobId>', 'the job (job_…)', idArgument('job')))
    .description("show a background job: what it runs, owner, phase or place in the queue, attempts, exit, duration, its output's digest and tail")
    .option('--cancel', 'ask the job to stop: it ends cancelled (with --follow: wait for that)')
    .option('--follow', 'print its live output (stdout) and phase moves (stderr) until it ends; exit 0 when it completed, 1 otherwise')
    .option('--json', 'the job as one JSON object (with --follow: NDJSON of its events and output chunks)')
    .action(act(async (id: string, o) => jobCommand(id, o, load(o), out)));

  common(program.command('verify').argument('<agentId>', 'the agent (or a job: job_…)', agentOrJob))
    .description("check an agent's log against the runtime's invariants")
    .option('--tree', "check every log of the agent's tree (from its root) and what links them")
    .option('--json', 'one JSON object')
    .action(act(async (id: string, o) => verifyCommand(id, o, load(o), out)));

  common(program.command('demo').argument('[scenario]', 'investigators: three subagents find the bug in parallel, their parent fixes it'))
    .description('run the bundled scenario: an agent fixes a failing test in a sample workspace')
    .option('--json', 'print only NDJSON events on stdout')
    .action(act(async (scenario: string | undefined, o) =>
      scenario === undefined ? demoCommand(o, load(o), out) : (demoScenarioOf(scenario), investigatorsDemoCommand(o, load(o), out))));

  common(program.command('doctor'))
    .description('check nats-server, JetStream, the data dir, LMDB and the model endpoint')
    .option('--model <spec>', 'the model to probe: scripted:<file.json> or openai:<model> (default: as `run` chooses)')
    .option('--base-url <url>', 'an OpenAI-compatible endpoint for openai: models (default: OPENAI_BASE_URL)')
    .option('--json', 'NDJSON, one check per line: {check, status, detail, fix}')
    .action(act(async (o) => doctorCommand(o, load(o), out)));

  common(program.command('chaos').argument('<script.json>', 'a scripted scenario whose shell calls append to effects.log'))
    .description('kill runs of a scenario at every fault point, resume them, and check each log and the effects')
    .option('--points <list>', 'all (default) or a comma-separated list of fault points')
    .option('--runs <n>', 'runs per point (default 1)')
    .option('--seed <n>', "kill at occurrences drawn by a seeded PRNG (default: each point's first occurrence)")
    .option('--hosts <k>', 'host processes: 1 (default) kills `run`; K > 1 starts K `actorloop host` processes and kills them')
    .option('--json', 'one JSON object per point, then a summary')
    .action(act(async (script: string, o) => chaosCommand(script, o, load(o), out)));

  common(program.command('trust').argument('[dir]', 'the workspace (default: the current directory)'))
    .description("trust a workspace: let its actorloop.toml set every key (endpoints, allow rules, a looser run mode), recorded in your config")
    .option('--revoke', 'stop trusting it: its actorloop.toml may only tighten again')
    .option('--json', 'one JSON object')
    .action(act(async (dir: string | undefined, o) => trustCommand(dir, o, loadConfig(flags(o)), out)));

  const configCmd = program.command('config').description('show the settings commands run with');
  common(configCmd.command('show'))
    .description('the effective settings in a workspace, where they came from, and the workspace keys that did not count')
    .option('--cwd <dir>', 'the workspace (default: the current directory)')
    .option('--json', 'one JSON object')
    .action(act(async (o) => configShowCommand(o, loadConfig(flags(o)), out)));

  registerDlqCommand(program, { common, flags, act, out });
  registerWorkflowCommand(program, { common, flags, act, out });
  registerApprovalsCommand(program, { common, flags, act, out });
  registerGcCommand(program, { common, flags, act, out });
  registerMemoryCommand(program, { common, flags, act, out });
  registerContextCommand(program, { common, flags, act, out });
  common(program.command('tree').argument('<rootId>', 'the top agent of the tree (a subagent or a job: its tree is shown)', agentOrJob))
    .description('show an agent and its subagents: name, ID, status, step or tool, tokens and cost of each, and the sums')
    .option('--follow', 'redraw as the tree changes, until no agent runs or waits (Ctrl-C stops)')
    .option('--json', 'the tree as one JSON object (with --follow: NDJSON, one snapshot per change)')
    .option('--gateway <url>', 'read the tree from this gateway (`actorloop serve`): no NATS, no LMDB here')
    .option('--gateway-token-file <file>', "with --gateway: a file holding the gateway's bearer token (its first line)")
    .action(act(async (id: string, o) => (o.gateway ? remoteTreeCommand(id, o, loadConfig(flags(o)), out) : treeCommand(id, o, loadConfig(flags(o)), out))));

  return program;
}

/** Runs the CLI with `argv` (without node and script) and returns the exit code. */
export async function main(
  argv: string[],
  out: Out = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin },
): Promise<number> {
  let code: number = EXIT.completed;
  let ownsStop = false;
  const program = buildProgram(out, (c) => (code = c), () => (ownsStop = true));
  // SIGTERM / SIGHUP: the command stops what it started and leaves its turn resumable, then exits
  // 128 + the signal (see stop-signals.ts), whatever it was doing when the signal came.
  const releaseSignals = catchStopSignals();
  const stopped = (c: number): number => {
    const signal = stopReceived();
    return signal !== null && !ownsStop ? exitCodeForSignal(signal) : c;
  };
  // Whoever read our output went away (`actorloop events <id> | head`): without a listener the
  // EPIPE would end the process on the spot, before it stops the embedded nats-server it started.
  // Stop as Ctrl-C stops (a follower ends, a host drains); what is left to write goes nowhere.
  let readerGone = false;
  const onOutputError = (err: NodeJS.ErrnoException): void => {
    if (err.code !== 'EPIPE') throw err;
    if (readerGone) return;
    readerGone = true;
    process.emit('SIGINT');
  };
  out.stdout.on('error', onOutputError);
  // `… 2>&1 | head`: stderr is the same pipe, and its EPIPE would end the process just the same
  out.stderr.on('error', onOutputError);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return stopped(code);
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.exitCode === 0) return EXIT.completed;
      return EXIT.usage;
    }
    return stopped(reportError(err, out, debugEnabled()));
  } finally {
    releaseSignals();
    // an EPIPE can still come from a write already queued: keep ignoring it
    if (!readerGone) {
      out.stdout.off('error', onOutputError);
      out.stderr.off('error', onOutputError);
    }
  }
}
