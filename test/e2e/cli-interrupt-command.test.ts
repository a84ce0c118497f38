// `actorloop interrupt` of an agent nobody runs (its run was killed mid-turn, no host is up): the
// command rehydrates it, its recovery takes the interrupt in, and the turn ends cancelled.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { lines, parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const stack = useCliStack({ nats: false });

test('interrupt of a killed run with no host: rehydrated here, the open turn ends cancelled, verify passes', async ({ onTestFinished }) => {
  const ws = await stack.workspace();
  const dataDir = await stack.dir('interrupt');
  const cli = stack.cli(onTestFinished, dataDir);
  const script = join(dataDir, 'script.json');
  await writeFile(script, JSON.stringify({ responses: [
    { tool_calls: [{ name: 'list_dir', arguments: { path: '.' } }] },
    // slow: a recovery that carries the turn on before the interrupt lands is caught mid-request
    { tool_calls: [{ name: 'read_file', arguments: { path: 'src/slug.js' } }], delay_ms: 20_000 },
    { content: 'done' },
  ] }));
  const run = await cli.run(['run', 'look', '--model', `scripted:${script}`, '--cwd', ws, '--json', '--fault', 'after:tool/start@1']);
  expect(run.signal, show(run)).toBe('SIGKILL');
  const agentId = lines(run.stderr)[0]!;
  const r = await cli.run(['interrupt', agentId, '--json']);
  expect(r.code, show(r)).toBe(0);
  const events = parseEvents(r.stdout);
  expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'cancelled', reason: 'interrupted' } });
  // the model's second answer was never taken: the interrupt ended the turn first. (The interrupt
  // is mail the rehydrated agent reads once it serves its inbox, and its recovery may start the
  // next step before: that step's request is then aborted, never answered.)
  expect(r.elapsedMs).toBeLessThan(15_000);
  const log = parseEvents((await cli.run(['events', agentId, '--json'])).stdout);
  expect(log.filter((e) => e.type === 'assistant/accepted')).toHaveLength(1);
  expect(log.some((e) => e.type === 'recovery/started')).toBe(true);
  const verify = await cli.run(['verify', agentId]);
  expect(verify.code, show(verify)).toBe(0);
}, 60_000);
