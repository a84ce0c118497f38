// A big tree in the page: 300 actors written through the real stores (the page benchmark's
// tree, `bench/page-tree.ts`), the real gateway in this process, headless chromium. The tree
// panel draws only the rows in view, yet says the whole tree's count; scrolling it brings the
// last actor into view, and clicking it selects it. A screenshot is saved under the test's temp dir.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../helpers/browser.js';
import { pino } from 'pino';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { writePageTree } from '../../bench/page-tree.js';
import { openRuntime, type Runtime } from '../../src/cli/runtime.js';
import { machineDefinitions } from '../../src/client/machine-definitions.js';
import { loadConfig } from '../../src/config/config.js';
import { startGateway, type Gateway } from '../../src/server/gateway.js';
import { REPO_ROOT } from '../helpers/cli.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { until } from './real-stack.js';

const ACTORS = 300;

let nats: TestNats;
let rt: Runtime;
let gateway: Gateway;
let browser: Browser;
const dirs: string[] = [];

beforeAll(async () => {
  nats = await startTestNats();
  const dataDir = await tempDir('page-big');
  dirs.push(dataDir);
  rt = await openRuntime(loadConfig({ nats: nats.url, dataDir }), pino({ level: 'silent' }));
  gateway = await startGateway({
    host: '127.0.0.1', port: 0, token: null, corsOrigins: [], allowFaults: false,
    reader: rt.reader, directory: rt.bus.directory, redact: (t) => rt.tooling.redactor.redact(t).text,
    machines: machineDefinitions().machines, commands: {} as never, logger: pino({ level: 'silent' }),
    pageDir: join(REPO_ROOT, 'dist', 'web'),
  });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await gateway?.close();
  await rt?.close();
  await nats?.stop();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

test('a tree of 300 actors: the panel draws the rows in view, scrolling brings the last one, and clicking selects it', async () => {
  const tree = await writePageTree(rt.bus, ACTORS);
  const shots = await tempDir('page-big-shots');
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  try {
    await page.goto(`${gateway.url}/?actor=${tree.rootId}`);
    const total = page.locator('[data-testid="tree-total"]');
    await until('the whole tree listed', async () => ((await total.textContent()) ?? '').includes(`${ACTORS} actors`), 60_000);
    const drawn = await page.locator('li.actor').count();
    expect(drawn).toBeGreaterThan(10);
    expect(drawn).toBeLessThan(ACTORS / 2);
    const last = page.locator(`li.actor[data-name="worker-${ACTORS - 1}"]`);
    expect(await last.count()).toBe(0);
    await page.locator('.tree ul').evaluate((ul) => ul.scrollTo({ top: ul.scrollHeight }));
    await until('the last actor drawn', async () => (await last.count()) === 1);
    await last.click();
    await until('the last actor selected', async () => ((await last.getAttribute('class')) ?? '').includes('selected'));
    await until('its summary shown', async () => ((await page.locator('.summary .actor-name').textContent().catch(() => '')) ?? '') === `worker-${ACTORS - 1}`);
    // the URL names it: the view can be shared
    expect(page.url()).toBe(`${gateway.url}/?actor=${await last.getAttribute('data-actor')}`);
    const shot = join(shots, 'big-tree.png');
    await page.screenshot({ path: shot });
    console.log(`screenshot: ${shot}`);
  } finally {
    await page.close();
  }
}, 120_000);
