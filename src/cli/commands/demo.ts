import { cp, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EffectiveConfig } from '../../config/config.js';
import type { Out } from '../output.js';
import { runCommand } from './run.js';
import { cliLine } from '../hints.js';

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
  const code = await runCommand(
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
