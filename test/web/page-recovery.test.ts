import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../helpers/browser.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import { tempDir } from '../helpers/nats.js';
import { turnRequest } from '../helpers/runtime.js';
import { answer, call } from '../helpers/scripted-tree.js';
import { actorTestWorld, startTurn } from '../actors/harness.js';
import { startPageServer, type PageServer } from './page-server.js';

// A run whose host died mid-call and was taken over, in the page: the timeline marks the death
// and the recovery, and time travel shows the agent killed, then recovering, then done.

const root = join(import.meta.dirname, '..', '..');
const world = actorTestWorld();
const shared = world.shared(() => ({ script: [call('read_file', { path: 'src/a.txt' }), answer('alpha and beta')] }));
let server: PageServer;
let rootId: string;
let browser: Browser;

beforeAll(async () => {
  await promisify(execFile)(process.execPath, [join(root, 'scripts', 'build-web.mjs')]);
  const rt = shared.rt;
  // the drop leaves a record of its point, as a kill does, for the recovery's actor/killed
  const dying = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs('after:tool/start=drop'), undefined, rt.faultRecords) });
  const { actor, ended } = await startTurn(dying, 'read', turnRequest(world.ws));
  await expect(ended).rejects.toMatchObject({ code: 'actor.dropped' });
  const sup = rt.supervisor();
  let done: Promise<unknown> | null = null;
  await sup.hydrate(actor.actorId, (a) => void (done = a.whenTurnEnds()));
  await done;
  rootId = actor.rootId;
  server = await startPageServer({ reader: sup.reader, rootId: actor.rootId, webDir: join(root, 'dist', 'web') });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

describe('the page on a recovered run', () => {
  it('marks the kill and the recovery on the timeline, and travels back to the agent killed, then recovering', async () => {
    const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
    page.setDefaultTimeout(5_000);
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${server.url}/?actor=${rootId}`);
    const main = page.locator('li.actor[data-name="main"]');
    await expect.poll(() => main.getAttribute('data-status')).toBe('completed');
    await expect.poll(() => page.locator('.timeline g.mark').evaluateAll((ms) => ms.map((m) => m.getAttribute('data-mark')))).toEqual(['killed', 'rehydrated']);
    const types = await page.locator('li.event').evaluateAll((ls) => ls.map((l) => l.getAttribute('data-type')));
    const slider = page.getByLabel('time travel');
    const status = async (position: number): Promise<string | null> => {
      await slider.fill(String(position));
      return main.getAttribute('data-status');
    };
    // one actor: its events are the stream, so a position is an index into the event list
    expect(await status(types.indexOf('actor/killed') + 1)).toBe('killed');
    expect(await status(types.indexOf('actor/rehydrated') + 1)).toBe('recovering');
    expect(await page.locator('.timeline g.mark').count()).toBe(2);
    expect(await status(types.indexOf('actor/killed'))).toBe('running');
    expect(await page.locator('.timeline g.mark').count()).toBe(0);
    const path = join(await tempDir('page-recovery'), 'recovery.png');
    await slider.fill(String(types.indexOf('actor/rehydrated') + 1));
    await page.screenshot({ path, fullPage: true });
    process.stdout.write(`screenshot: ${path}\n`);
    expect(errors).toEqual([]);
    await page.close();
  });
});
