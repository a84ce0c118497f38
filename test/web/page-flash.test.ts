// The page's live statecharts against the real thing: an `actorloop host` and an `actorloop serve`
// process on one nats-server, a scripted agent waiting for an approval. In headless chromium the
// selected actor's machines are followed through `machines.subscribe`; approving runs the call
// and the next step, and the statecharts flash the states the host reports as its machines enter
// them (among them the step's `accepting`, which the log's fold never lights). Back in time, the
// feed is closed and nothing flashes. A screenshot is saved under the test's temp dir.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { cliEnv, lines } from '../helpers/cli.js';
import { tempDir } from '../helpers/nats.js';
import { until, useRealStack } from './real-stack.js';

const usage = { input_tokens: 30, output_tokens: 5 };
const SCRIPT = {
  responses: [
    { tool_calls: [{ name: 'write_file', arguments: { path: 'notes.txt', content: 'hello\n' } }], usage },
    { content: 'wrote notes.txt', usage },
  ],
};

const stack = useRealStack('page-flash');
const { start, pool, dirs } = stack;

test('live, the statecharts flash the states a host reports its machines entering; back in time nothing flashes', async ({ onTestFinished }) => {
  const ws = await tempDir('page-flash-ws');
  const shots = await tempDir('page-flash-shots');
  dirs.push(ws);
  const script = join(stack.dataDir, 'script.json');
  await writeFile(script, JSON.stringify(SCRIPT));
  const host = start(['host', '--name', 'flash-host', '--lease-ttl', '10000']);
  await until('the host to start', () => host.err().includes('hosting agents'));
  const serve = await stack.serve();
  const cli = pool.forTest({ onTestFinished }, cliEnv(stack.dataDir));
  const run = await cli.run(['run', 'write notes.txt', '--model', `scripted:${script}`, '--approve', 'ask', '--cwd', ws, '--nats', stack.nats.url, '--data-dir', stack.dataDir]);
  const agentId = lines(run.stdout)[0]!;
  expect(agentId).toMatch(/^agt_/);

  const page = await stack.browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${serve.pageUrl}&actor=${agentId}`);
  // every state that flashes, by machine, recorded as it appears (a flash lasts a second)
  // (a script string: the tests compile without the DOM's types)
  await page.evaluate(`(() => {
    const seen = [];
    window.flashed = seen;
    new MutationObserver(() => {
      for (const g of document.querySelectorAll('.chart .state.flash-state')) {
        const entry = g.closest('.chart').getAttribute('data-machine') + ':' + g.getAttribute('data-state');
        if (!seen.includes(entry)) seen.push(entry);
      }
    }).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['class'] });
  })()`);
  const flashedSoFar = (): Promise<string[]> => page.evaluate('window.flashed') as Promise<string[]>;
  // the host answered the page's watch: from here on it reports this actor's moves
  await page.locator('section.charts[data-feed="host"]').waitFor({ timeout: 30_000 });
  const approve = page.locator('button.approve').first();
  await approve.waitFor({ timeout: 15_000 });
  await approve.click();
  await page.locator('.chart .state.flash-state').first().waitFor({ state: 'attached', timeout: 30_000 });
  await until('the turn to end in the page', async () => (await page.locator('.chart[data-machine="agent"]').getAttribute('data-active-state')) === 'idle');
  await until('the last move to have flashed', async () => (await flashedSoFar()).includes('agent:idle'));
  const flashed = await flashedSoFar();
  expect(flashed).toContain('step:accepting');
  expect(flashed).toContain('tool-call:started');
  await page.screenshot({ path: join(shots, 'flash.png'), fullPage: true });
  console.log(`screenshot: ${join(shots, 'flash.png')}`);

  // back in time: the feed is closed, nothing flashes
  await page.getByLabel('time travel').fill('3');
  await page.locator('section.charts[data-feed="off"]').waitFor({ timeout: 5_000 });
  expect(await page.locator('.chart .state.flash-state').count()).toBe(0);
  expect(errors).toEqual([]);
  await page.close();
  serve.proc.kill('SIGTERM');
  host.proc.kill('SIGTERM');
  await Promise.all([serve.exited, host.exited]);
}, 120_000);
