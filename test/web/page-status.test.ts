// One status for one log, whoever reads it: a turn `run` left when it ended (a follow-up that
// started as it stopped hosting) is `released` in `runs`, in `tree`, in the gateway's reads and on
// the page's badge, and travelling back over the log the page's badge at every position is what
// the shared status function reads from the events up to it.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { agentStatus } from '../../src/client/status.js';
import type { ActorSummary } from '../../src/protocol/gateway.js';
import { emptyProjection, foldEvent } from '../../src/store/projection.js';
import { cliEnv, parseEvents, parseRuns } from '../helpers/cli.js';
import { tempDir } from '../helpers/nats.js';
import { until, useRealStack } from './real-stack.js';

const stack = useRealStack('page-status');

test('a turn left with nothing to run it reads released in runs, tree, the gateway and the page, and the page agrees at every position', async ({ onTestFinished }) => {
  const ws = await tempDir('page-status-ws');
  stack.dirs.push(ws);
  const script = join(ws, '..', `status-${Date.now()}.json`);
  // turn 2 is slow too, so it is still open when the run that hosts it stops
  await writeFile(script, JSON.stringify({ responses: [{ content: 'first answer', delay_ms: 5_000 }, { content: 'second answer', delay_ms: 4_000 }] }));
  const common = ['--nats', stack.nats.url, '--data-dir', stack.dataDir];
  const cli = stack.pool.forTest({ onTestFinished }, cliEnv(stack.dataDir));
  const running = cli.run(['run', 'slow question', '--model', `scripted:${script}`, '--cwd', ws, ...common]);
  let agentId = '';
  await until('the run to be in its turn', async () => {
    agentId = parseRuns((await cli.run(['runs', '--json', ...common])).stdout).find((r) => r.workspace === ws && r.status === 'running')?.actorId ?? '';
    return agentId !== '';
  });
  expect((await cli.run(['send', agentId, 'and then?', '--follow-up', '--no-follow', ...common])).code).toBe(0);
  const run = await running;
  expect(run.stderr).toContain('nothing runs it now');

  // the CLI
  expect(parseRuns((await cli.run(['runs', '--json', ...common])).stdout).find((r) => r.actorId === agentId)?.status).toBe('released');
  const tree = JSON.parse((await cli.run(['tree', agentId, '--json', ...common])).stdout) as { agents: Array<{ actorId: string; status: string }> };
  expect(tree.agents.find((a) => a.actorId === agentId)?.status).toBe('released');

  // the gateway's reads
  const serve = await stack.serve();
  const list = (await (await fetch(`${serve.url}v1/actors`, { headers: serve.auth })).json()) as { actors: ActorSummary[] };
  expect(list.actors.find((a) => a.id === agentId)?.status).toBe('released');
  const detail = (await (await fetch(`${serve.url}v1/actors/${agentId}`, { headers: serve.auth })).json()) as { actor: ActorSummary };
  expect(detail.actor.status).toBe('released');

  // the page, live (the gateway's word) and at every position of the log (its own fold)
  const page = await stack.browser.newPage({ viewport: { width: 1400, height: 1000 } });
  onTestFinished(() => page.close());
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${serve.pageUrl}&actor=${agentId}`);
  const main = page.locator('li.actor[data-name="main"]');
  await until('the page to show the agent released', async () => (await main.getAttribute('data-status')) === 'released');
  const events = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
  await until('the page to hold every event', async () => (await page.locator('li.event').count()) === events.length);
  const slider = page.getByLabel('time travel');
  const p = emptyProjection(agentId);
  const expected: string[] = [];
  const shown: string[] = [];
  for (const [i, e] of events.entries()) {
    foldEvent(p, e);
    expected.push(agentStatus(p, e.type));
    // the last position is live again: the gateway's row
    await slider.fill(String(i + 1));
    shown.push((await main.getAttribute('data-status'))!);
  }
  expect(shown).toEqual(expected);
  expect(expected.at(-1)).toBe('released');
  expect(errors).toEqual([]);
});
