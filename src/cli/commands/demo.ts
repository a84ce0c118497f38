import { cp, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EffectiveConfig } from '../../config/config.js';
import { openBus } from '../../bus/connection.js';
import { ConfigError } from '../../protocol/errors.js';
import type { ActorEvent } from '../../protocol/events.js';
import { createLogReader } from '../../store/jetstream-log.js';
import type { LogReader } from '../../store/log-port.js';
import type { Out } from '../output.js';
import { busOptions, createLogger } from '../runtime.js';
import { terminalText } from '../../client/terminal-text.js';
import { cliLine } from '../hints.js';
import { startAgent } from '../turn/start-agent.js';

/** Where the bundled demo lives: `examples/demo` at the package root. */
export function demoDir(): string {
  // dist/cli/commands/demo.js and src/cli/commands/demo.ts are both three levels below the root.
  return join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'examples', 'demo');
}

/** The demo's task, a contract with its script and the replay fixture. */
export const DEMO_TASK = 'The test in test/slug.test.js fails. Find the bug in src/slug.js, fix it, and tell me what was wrong.';

/**
 * `actorloop demo`: copies a small workspace with a failing test to a temp dir and runs the
 * bundled script on it: the agent reads the code, finds the bug, writes the fix and answers.
 */
export async function demoCommand(opts: { json?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  const source = demoDir();
  const workspace = await mkdtemp(join(tmpdir(), 'actorloop-demo-'));
  await cp(join(source, 'workspace'), workspace, { recursive: true });
  const info = opts.json ? out.stderr : out.stdout;
  info.write(`demo workspace: ${workspace}\n`);
  info.write('run mode auto-edit: workspace edits run without asking (actorloop run --approve ask asks first)\n');
  let agentId = '<agentId>';
  const code = await startAgent(
    DEMO_TASK,
    // the fix is a workspace edit: allowed without asking, as `--approve auto-edit` would
    { model: `scripted:${join(source, 'script.json')}`, cwd: workspace, json: opts.json, approve: 'auto-edit' },
    config,
    out,
    (id) => (agentId = id),
  );
  // each line carries this command's --data-dir and --nats when they are not the defaults
  const inspect: Array<[string, string]> = [
    [`npx ${cliLine(config, 'runs')}`, 'the agents of this data dir'],
    [`npx ${cliLine(config, 'events', agentId)}`, "the agent's event log"],
    [`npx ${cliLine(config, 'verify', agentId)}`, "check the log's invariants"],
    [`cat ${join(workspace, 'src', 'slug.js')}`, 'the fixed file'],
  ];
  info.write(inspectLines(config, inspect));
  return code;
}

/** What a demo prints at its end: where its data is, and commands (each with what it shows) to look at it. */
export function inspectLines(config: Pick<EffectiveConfig, 'dataDir'>, inspect: Array<[string, string]>): string {
  const width = Math.max(...inspect.map(([c]) => c.length));
  return [
    '',
    `data dir: ${config.dataDir} (JetStream store under nats/, LMDB snapshots and blobs under lmdb/)`,
    'inspect it (from this repository):',
    ...inspect.map(([c, what]) => `  ${c.padEnd(width)}   ${what}`),
    '',
  ].join('\n');
}

/** The investigators demo's task, a contract with its script. */
export const INVESTIGATORS_TASK =
  'The tests in this workspace fail since the last change. Find out why with three investigators working in parallel ' +
  '(one reads the failing test, one the recent change, one reproduces the failure), merge what they find, fix the code and run the tests.';

/** The scenarios `actorloop demo <scenario>` runs besides the default one. */
export const DEMO_SCENARIOS = ['investigators'] as const;

/** Where the investigators demo lives: `examples/investigators` beside `examples/demo`. */
export function investigatorsDir(): string {
  return join(demoDir(), '..', 'investigators');
}

/** `actorloop demo <scenario>`: one line and exit 2 for a scenario the CLI does not have. */
export function demoScenarioOf(name: string): (typeof DEMO_SCENARIOS)[number] {
  const known = DEMO_SCENARIOS.find((s) => s === name);
  if (known) return known;
  throw new ConfigError('cli.demo_unknown', `there is no demo "${name}"`, { hint: `run \`actorloop demo\` or one of: ${DEMO_SCENARIOS.map((s) => `\`actorloop demo ${s}\``).join(', ')}` });
}

/**
 * What the tree printer says of one event, if anything: a child spawned, a child's report, a
 * child's turn ending. Children are named as their parent spawned them.
 */
export function treeLine(actorId: string, e: ActorEvent, names: Map<string, string>, reports: Map<string, string>): string | null {
  const name = (id: string) => names.get(id) ?? id;
  switch (e.type) {
    case 'subagent/spawn_requested':
      names.set(e.data.childId, e.data.name);
      return null;
    case 'subagent/spawned':
      return `tree: ${name(actorId)} spawned ${name(e.data.childId)} (${e.data.childId})`;
    case 'tool/start':
      if (e.data.name === 'report' && e.call) reports.set(e.call, String((e.data.input as { content?: unknown }).content ?? ''));
      return null;
    case 'subagent/reported':
      return `tree: ${name(actorId)} reports: ${terminalText(firstLine(reports.get(e.call ?? '') ?? ''))}`;
    case 'turn/end':
      // a child's turn (it owes its parent the notice); the root's end is the run's own output
      if (e.data.noticeOwed !== true) return null;
      return `tree: ${name(actorId)} ended its turn: ${e.data.outcome}${e.data.answer ? ` — ${terminalText(firstLine(e.data.answer))}` : ''}`;
    default:
      return null;
  }
}

function firstLine(text: string): string {
  const line = text.trim().split('\n')[0] ?? '';
  return line.length > 160 ? `${line.slice(0, 157)}...` : line;
}

/**
 * Prints the tree's children as they come and go, until `stop` aborts or the root's turn ends;
 * resolves when it has stopped.
 */
async function printTree(reader: LogReader, rootId: string, write: (line: string) => void, stop: AbortSignal): Promise<void> {
  const names = new Map<string, string>([[rootId, 'main']]);
  const reports = new Map<string, string>();
  try {
    for await (const { actorId, event } of reader.followTree(rootId, { signal: stop })) {
      const line = treeLine(actorId, event, names, reports);
      if (line) write(`${line}\n`);
      if (actorId === rootId && event.type === 'turn/end') return;
    }
  } catch (err) {
    // the printer is the demo's commentary: the run goes on, and says how it ended, without it
    if (!stop.aborted) write(`tree: stopped following the tree (${(err as Error).message})\n`);
  }
}

/**
 * `actorloop demo investigators`: copies a small workspace whose tests fail since its last change
 * and runs a scripted tree on it: the agent spawns three investigators in one step (the failing
 * test, the recent change, a reproduction), waits for what each reports and answers, merges it,
 * fixes the code and runs the tests. The tree is printed as it runs.
 */
export async function investigatorsDemoCommand(opts: { json?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  const source = investigatorsDir();
  const workspace = await mkdtemp(join(tmpdir(), 'actorloop-investigators-'));
  await cp(join(source, 'workspace'), workspace, { recursive: true });
  const info = opts.json ? out.stderr : out.stdout;
  info.write(`demo workspace: ${workspace}\n`);
  // shell runs in the sandbox without asking (full-auto), so the investigators never wait for a person
  info.write('run mode full-auto: edits and sandboxed shell run without asking (actorloop run --approve ask asks first)\n');
  const logger = createLogger(config);
  // opened before the run, so the run reuses (and never stops under us) the server this one starts
  const bus = await openBus(busOptions(config, logger, 'actorloop-demo-tree', 'client'));
  const reader = createLogReader({ js: bus.js, jsm: bus.jsm });
  const stop = new AbortController();
  let printing: Promise<void> = Promise.resolve();
  let rootId = '<rootId>';
  let code: number;
  try {
    code = await startAgent(
      INVESTIGATORS_TASK,
      { model: `scripted:${join(source, 'script.json')}`, cwd: workspace, json: opts.json, approve: 'full-auto' },
      config,
      out,
      (id) => {
        rootId = id;
        printing = printTree(reader, id, (line) => info.write(line), stop.signal);
      },
    );
    // the printer has seen the root's turn end, or is shown the door a little after
    const late = setTimeout(() => stop.abort(), 5_000);
    await printing;
    clearTimeout(late);
  } finally {
    stop.abort();
    await printing;
    await bus.close();
  }
  const inspect: Array<[string, string]> = [
    [`npx ${cliLine(config, 'tree', rootId)}`, 'the tree of agents'],
    [`npx ${cliLine(config, 'events', rootId, '--tree')}`, 'every event of the tree'],
    [`npx ${cliLine(config, 'verify', rootId, '--tree')}`, "check every log's invariants and the tree's"],
    [`cat ${join(workspace, 'src', 'total.js')}`, 'the fixed file'],
  ];
  info.write(inspectLines(config, inspect));
  return code;
}
