// Jobs on the page, against a real gateway (with its token) on a real nats-server, on a tree
// written as the job host writes one (test/server/gateway-jobs-tree.ts): an owner agent with a
// completed job, a running one and a queued one. In headless Chromium: the tree shows each job
// under its owner as a job; the timeline's job lane draws a bar per job coloured by its phase and
// named by its job name; selecting a job shows its command, phase, attempts, exit code, queue
// place and output tail; Cancel calls `job.cancel`, says so, and the interrupt reaches the job's
// inbox; a running job's output shows live (its live subject, relayed by the gateway), and once the
// job's log says it was cancelled the page shows that live, the tail its end records in place of
// the live output. A gateway that relays no live output: the page says the tail comes at the end.
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { GATEWAY_SENDER } from '../../src/client/messages.js';
import type { Gateway } from '../../src/server/gateway.js';
import { launchChromium } from '../helpers/browser.js';
import { REPO_ROOT } from '../helpers/cli.js';
import { jobEnd } from '../helpers/job-log.js';
import { openGatewayFixture, type GatewayFixture } from '../server/gateway-fixture.js';
import { DONE, lastPersonMessage, OWNER, QUEUED, RUNNING, writeJobTree, type JobLog } from '../server/gateway-jobs-tree.js';
import { liveSubject } from '../../src/bus/subjects.js';
import { createNatsJobOutputSource } from '../../src/server/job-output.js';
import { until } from './real-stack.js';

const TOKEN = 'page-jobs-token-0123456789abcdef';
let fx: GatewayFixture;
let gw: Gateway;
let browser: Browser;
let running: JobLog;
let startedJob: () => Promise<string>;

beforeAll(async () => {
  fx = await openGatewayFixture();
  ({ running, startedJob } = await writeJobTree(fx.rt));
  // the page as `actorloop serve` serves it: the build of web/ (`npm run build` first)
  gw = await fx.gateway({ token: TOKEN, pageDir: join(REPO_ROOT, 'dist', 'web'), jobOutput: createNatsJobOutputSource(fx.rt.bus.nc) });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await fx?.stop();
}, 60_000);

/** A page on the tree, with every script error and every refused request it met. */
async function open(actor: string, on: Gateway = gw): Promise<{ page: Page; problems: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(String(e)));
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`${r.status()} ${r.url()}`);
  });
  await page.goto(`${on.url}/?token=${TOKEN}&actor=${actor}`);
  return { page, problems };
}

const text = async (page: Page, testId: string): Promise<string> => (await page.getByTestId(testId).textContent().catch(() => null)) ?? '';

test('the tree shows each job under its owner; the job lane draws a bar per job, coloured by its phase and named by its job', async () => {
  const { page, problems } = await open(OWNER);
  const rows = page.locator('section.tree li.actor');
  const shown = () => rows.evaluateAll((lis) => lis.map((li) => `${li.getAttribute('data-kind')}:${li.getAttribute('data-name')}:${li.getAttribute('data-status')}`).join(' '));
  // each job's badge is its phase, as its log folded on the page says (the gateway's read says `starting` for pending)
  await until('the owner and its three jobs in the tree, each in its phase', async () => (await shown()) === 'agent:main:running job:build:completed job:tests:running job:lint:pending');
  expect(await text(page, 'tree-total')).toMatch(/^tree: 1 actors · 3 jobs · /);
  // under the owner: one step in
  const pad = (id: string) => page.locator(`li.actor[data-actor="${id}"]`).evaluate((li) => parseInt((li as { style: { paddingLeft: string } }).style.paddingLeft, 10));
  expect(await pad(RUNNING)).toBeGreaterThan(await pad(OWNER));

  const lane = page.getByTestId('job-lane');
  await until('the job lane with three bars', async () => (await lane.locator('g.job-bar').count()) === 3);
  const bar = (id: string) => lane.locator(`g.job-bar[data-job="${id}"]`);
  expect(await bar(DONE).getAttribute('data-phase')).toBe('completed');
  expect(await bar(DONE).getAttribute('class')).toContain('job-completed');
  expect(Number(await bar(DONE).getAttribute('data-to'))).toBeGreaterThanOrEqual(Number(await bar(DONE).getAttribute('data-from')));
  expect(await bar(RUNNING).getAttribute('data-phase')).toBe('running');
  expect(await bar(RUNNING).getAttribute('data-to')).toBe('');
  expect(await bar(QUEUED).getAttribute('class')).toContain('queued');
  expect(await lane.locator('text.job-bar-label').allTextContents()).toEqual(['build', 'tests', 'lint']);
  // the completed job ended before the running one began
  expect(Number(await bar(DONE).getAttribute('data-to'))).toBeLessThanOrEqual(Number(await bar(RUNNING).getAttribute('data-from')));
  expect(await text(page, 'timeline-legend')).toContain('job running');
  expect(problems).toEqual([]);
  await page.close();
}, 60_000);

test('selecting a job shows its command, phase, attempts, exit code, queue place and tail; a job that ended cannot be cancelled', async () => {
  const { page, problems } = await open(OWNER);
  const lane = page.getByTestId('job-lane');
  await until('the job lane', async () => (await lane.locator('g.job-bar').count()) === 3);
  // from the lane
  await lane.locator(`g.job-bar[data-job="${RUNNING}"] text`).click();
  await until('the running job to open', async () => (await text(page, 'job-id')) === RUNNING);
  expect(new URL(page.url()).searchParams.get('actor')).toBe(RUNNING);
  expect(await text(page, 'job-command')).toBe('npm test');
  expect(await text(page, 'job-phase')).toBe('running');
  expect(await text(page, 'job-attempts')).toBe('1 of 2');
  // its output live, as its host publishes it on the job's live subject
  const liveOut = page.getByTestId('job-live');
  await until('the live output to open', async () => (await liveOut.getAttribute('data-live').catch(() => null)) === 'open');
  expect(await liveOut.textContent()).toBe('(no output yet)');
  const subject = liveSubject(OWNER, RUNNING);
  fx.rt.bus.nc.publish(subject, JSON.stringify({ type: 'job/output', text: 'ok 1 - parses\n' }));
  fx.rt.bus.nc.publish(subject, JSON.stringify({ type: 'job/output', text: 'ok 2 - folds\n' }));
  await until('the chunks on the page', async () => (await liveOut.textContent()) === 'ok 1 - parses\nok 2 - folds\n');
  expect(await page.getByRole('button', { name: 'Cancel', exact: true }).isEnabled()).toBe(true);
  // no agent's panels for a job: no summary, actions or statecharts
  expect(await page.locator('section.actions').count()).toBe(0);
  expect(await page.locator('section[aria-label="actor summary"]').count()).toBe(0);

  // from the tree
  await page.locator(`li.actor[data-actor="${DONE}"]`).click();
  await until('the completed job to open', async () => (await text(page, 'job-id')) === DONE);
  expect(await text(page, 'job-phase')).toBe('completed');
  expect(await text(page, 'job-exit')).toMatch(/^exit code 0 · took 1.5 s · output 12 bytes/);
  expect(await text(page, 'job-tail')).toBe('built 3 targets\n');
  expect(await page.getByRole('button', { name: 'Cancel', exact: true }).isEnabled()).toBe(false);

  await page.locator(`li.actor[data-actor="${QUEUED}"]`).click();
  await until('the queued job to say its place', async () => (await text(page, 'job-queue')).includes('#1 in line'));
  expect(await text(page, 'job-attempts')).toBe('0 of 1 · not idempotent: not restarted');
  expect(problems).toEqual([]);
  await page.close();
}, 60_000);

test('Cancel calls job.cancel and says so, the interrupt reaches the job\'s inbox; the job\'s end shows live, its tail with it', async () => {
  const { page, problems } = await open(RUNNING);
  await until('the running job to open', async () => (await text(page, 'job-phase')) === 'running');
  await until('its live output to open', async () => (await page.getByTestId('job-live').getAttribute('data-live').catch(() => null)) === 'open');
  fx.rt.bus.nc.publish(liveSubject(OWNER, RUNNING), JSON.stringify({ type: 'job/output', text: 'ok 40 - last\n' }));
  await until('the chunk on the page', async () => (await text(page, 'job-live')) === 'ok 40 - last\n');
  await page.getByRole('button', { name: 'Cancel', exact: true }).click();
  await until('the page to say what Cancel did', async () => /^cancel sent \(msg_\S+\): /.test(await text(page, 'job-said'))).catch(async (e: Error) => {
    throw new Error(`${e.message}: it says "${await text(page, 'job-said')}"`);
  });
  const messageId = /\((msg_\S+)\)/.exec(await text(page, 'job-said'))![1]!;
  const msg = await lastPersonMessage(fx.rt, RUNNING);
  expect(msg).toMatchObject({ id: messageId, to: RUNNING, from: GATEWAY_SENDER, kind: 'interrupt' });

  // its host takes the interrupt as a cancel: the log records the ask, then the end
  await running.commit((b) => b.push('job/cancel_requested', { reason: 'user_cancelled', by: GATEWAY_SENDER, messageId }));
  await running.commit((b) => b.phase('running', 'cancelled', 'user_cancelled', 1, { ...jobEnd(null), signal: 'SIGTERM', tail: 'ran 40 of 120 tests\n' }));
  await until('the page to show the job cancelled', async () => (await text(page, 'job-phase')) === 'cancelled');
  // the tail its end records replaces the live output
  expect(await text(page, 'job-tail')).toBe('ran 40 of 120 tests\n');
  expect(await page.getByTestId('job-live').count()).toBe(0);
  expect(await text(page, 'job-exit')).toMatch(/^killed by SIGTERM/);
  expect(await page.getByRole('button', { name: 'Cancel', exact: true }).isEnabled()).toBe(false);
  const bar = page.getByTestId('job-lane').locator(`g.job-bar[data-job="${RUNNING}"]`);
  await until('its bar to end, coloured cancelled', async () => (await bar.getAttribute('data-phase')) === 'cancelled' && (await bar.getAttribute('data-to')) !== '');
  expect(await bar.getAttribute('class')).toContain('job-cancelled');
  await until('the tree to say it too', async () => (await page.locator(`li.actor[data-actor="${RUNNING}"]`).getAttribute('data-status')) === 'cancelled');
  expect(problems).toEqual([]);
  await page.close();
}, 60_000);

test('a gateway that relays no live output: the page says the tail shows once the job ends', async () => {
  const bare = await fx.gateway({ token: TOKEN, pageDir: join(REPO_ROOT, 'dist', 'web') });
  // a job that runs: the earlier test cancelled the first one
  const job = await startedJob();
  const { page, problems } = await open(job, bare);
  await until('the job to open', async () => (await text(page, 'job-phase')) === 'running');
  await until('the page to say no live output comes', async () => (await page.getByTestId('job-output-note').getAttribute('data-live').catch(() => null)) === 'none');
  expect(await text(page, 'job-output-note')).toContain('live output is not relayed by this gateway: the last lines show here once the job ends');
  // the one refusal: the output route's
  expect(problems).toEqual([`404 ${bare.url}/v1/jobs/${job}/output`]);
  await page.close();
}, 60_000);
