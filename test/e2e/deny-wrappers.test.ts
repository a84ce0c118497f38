// Deny rules against commands that hide their work (issue 13, item 7), through the real CLI: with
// a deny rule for sudo in the workspace's actorloop.toml and `--approve full-auto`, a script file
// run by bash and inline Python are denied as tool results the model reads, not run and not left
// waiting for a person, and the files they would have made do not appear.
import { access, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'vitest';
import { parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const RUN_SCRIPT = 'bash run.sh';
const INLINE_PYTHON = `python3 -c "import os; os.system('touch pwned2')"`;

const stack = useCliStack();

async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}

describe('opaque commands under a deny rule', () => {
  test('full-auto denies bash run.sh and python3 -c as tool results; neither runs', async ({ expect, onTestFinished }) => {
    const ws = await stack.dir('ws');
    const dataDir = await stack.dir('data');
    await writeFile(join(ws, 'run.sh'), 'touch pwned\n');
    await writeFile(join(ws, 'actorloop.toml'), '[[policy.rules]]\ntool = "shell"\ncommand = "sudo"\ndecision = "deny"\nreason = "no sudo here"\n');
    const script = join(dataDir, 'script.json');
    await writeFile(
      script,
      JSON.stringify({
        responses: [
          { tool_calls: [{ name: 'shell', arguments: { command: RUN_SCRIPT } }] },
          { tool_calls: [{ name: 'shell', arguments: { command: INLINE_PYTHON } }] },
          { content: 'Both commands were denied.' },
        ],
      }),
    );
    const cli = stack.cli(onTestFinished, dataDir);
    const run = await cli.run([
      'run', 'run the setup script', '--model', `scripted:${script}`, '--cwd', ws, '--approve', 'full-auto', '--json',
      '--nats', stack.nats.url, '--data-dir', dataDir,
    ]);
    expect({ code: run.code, signal: run.signal }, show(run)).toEqual({ code: 0, signal: null });
    const events = parseEvents(run.stdout);
    const decided = events.flatMap((e) => (e.type === 'policy/decided' ? [e.data] : []));
    expect(decided.map((d) => [d.decision, d.rule])).toEqual([
      ['deny', 'shell:opaque'],
      ['deny', 'shell:opaque'],
    ]);
    const denied = events.flatMap((e) => (e.type === 'tool/denied' ? [e.data.reason] : []));
    expect(denied).toEqual([
      expect.stringContaining('"bash run.sh" runs the shell script run.sh, whose commands the policy cannot see, and policy rule 1 (no sudo here)'),
      expect.stringContaining('runs inline python3 code, whose commands the policy cannot see, and policy rule 1 (no sudo here)'),
    ]);
    expect(events.some((e) => e.type === 'approval/requested' || e.type === 'tool/start')).toBe(false);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
    expect(await exists(join(ws, 'pwned'))).toBe(false);
    expect(await exists(join(ws, 'pwned2'))).toBe(false);
  });
});
