// A job cancelled from the page, against the real thing: an `actorloop host` and an
// `actorloop serve` on one nats-server, and an agent (scripted model) whose `start_job` call runs
// `sleep` in the background. In headless Chromium: the job appears in the tree under its owner and
// in the timeline's job lane, running; its panel shows its command; Cancel sends `job.cancel`, the
// host takes the interrupt from the job's inbox (its log records `job/cancel_requested` naming the
// message the page said it sent), stops the command, and the page shows the job cancelled, live.
import { writeFile } from 'node:fs/promises';
import { sleepers } from '../helpers/processes.js';
import { join } from 'node:path';
import { pino } from 'pino';
import { beforeAll, expect, test } from 'vitest';
import { openBus } from '../../src/bus/connection.js';
import { GATEWAY_SENDER } from '../../src/client/messages.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { createLogReader } from '../../src/store/jetstream-log.js';
import { tempDir } from '../helpers/nats.js';
import { submitTask } from '../helpers/submit.js';
import { until, useRealStack, type Served, type Started } from './real-stack.js';

const stack = useRealStack('page-jobs-host');
const SLEEP = '300.0517';
let host: Started;
let serve: Served;
let agentId = '';

/** A log of the tree, read from the bus. */
async function logOf(actorId: string): Promise<ActorEvent[]> {
  const bus = await openBus({ natsUrl: stack.nats.url, dataDir: stack.dataDir, logger: pino({ level: 'silent' }) });
  try {
    const reader = createLogReader({ js: bus.js, jsm: bus.jsm });
    const out: ActorEvent[] = [];
    for await (const { event } of reader.read(agentId, actorId)) out.push(event);
    return out;
  } finally {
    await bus.close();
  }
}


beforeAll(async () => {
  const ws = await tempDir('page-jobs-host-ws');
  const scripts = await tempDir('page-jobs-host-script');
  stack.dirs.push(ws, scripts);
  const script = join(scripts, 'job.json');
  await writeFile(script, JSON.stringify({ responses: [
    { tool_calls: [{ name: 'start_job', arguments: { name: 'soak', command: `echo soaking && sleep ${SLEEP}` } }] },
    { content: 'started the soak' },
    { content: 'heard how it ended' },
  ] }));
  host = stack.start(['host', '--name', 'jobs-page-host', '--lease-ttl', '10000']);
  await until('the host to start', () => host.err().includes('hosting agents'));
  serve = await stack.serve();
  agentId = await submitTask({ natsUrl: stack.nats.url, dataDir: stack.dataDir, ws, model: `scripted:${script}`, approvalMode: 'full-auto' });
}, 120_000);

test('the page shows the running job, Cancel stops it through its host, and the page shows it cancelled', async () => {
  const page = await stack.browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`${String(e)} ${e.stack ?? ''}`));
  await page.goto(`${serve.pageUrl}&actor=${agentId}`);
  const bar = page.getByTestId('job-lane').locator('g.job-bar');
  await until('the job running in the job lane', async () => (await bar.getAttribute('data-phase').catch(() => null)) === 'running', 60_000).catch((e: Error) => {
    throw new Error(`${e.message}\n${host.err()}`);
  });
  const jobId = (await bar.getAttribute('data-job'))!;
  expect(jobId).toMatch(/^job_/);
  expect(await bar.locator('text').textContent()).toBe('soak');
  // in the tree, under its owner
  const row = page.locator(`li.actor[data-actor="${jobId}"]`);
  await until('the job in the tree', async () => (await row.getAttribute('data-kind').catch(() => null)) === 'job');
  expect(await row.getAttribute('data-name')).toBe('soak');
  await until('its command running', async () => (await sleepers(SLEEP)).length > 0);

  await row.click();
  const text = async (testId: string): Promise<string> => (await page.getByTestId(testId).textContent().catch(() => null)) ?? '';
  await until('the job panel', async () => (await text('job-id')) === jobId);
  expect(await text('job-command')).toBe(`echo soaking && sleep ${SLEEP}`);
  expect(await text('job-phase')).toBe('running');
  expect(await text('job-attempts')).toMatch(/^1 of 1/);
  // `serve` relays the job's live output as its host publishes it (the line came before the page
  // opened the stream, so it is not in it: live output is never stored; the stream is open)
  await until('the live output stream open', async () => (await page.getByTestId('job-live').getAttribute('data-live').catch(() => null)) === 'open');

  await page.getByRole('button', { name: 'Cancel', exact: true }).click();
  await until('the page to say what Cancel did', async () => /^cancel sent \(msg_\S+\): /.test(await text('job-said')));
  const messageId = /\((msg_\S+)\)/.exec(await text('job-said'))![1]!;
  await until('the page to show the job cancelled', async () => (await text('job-phase')) === 'cancelled', 60_000).catch((e: Error) => {
    throw new Error(`${e.message}\n${host.err()}`);
  });
  await until('its bar to end, cancelled', async () => (await bar.getAttribute('data-phase')) === 'cancelled' && (await bar.getAttribute('data-to')) !== '');
  expect(await page.getByRole('button', { name: 'Cancel', exact: true }).isEnabled()).toBe(false);
  await until('the command stopped', async () => (await sleepers(SLEEP)).length === 0);

  // the host took the page's interrupt from the job's inbox as the cancel
  const log = await logOf(jobId);
  const asked = log.find((e) => e.type === 'job/cancel_requested');
  expect(asked?.type === 'job/cancel_requested' && asked.data).toMatchObject({ reason: 'user_cancelled', messageId });
  const end = log.find((e) => e.type === 'job/phase' && e.data.phase === 'cancelled');
  expect(end?.type === 'job/phase' && end.data.reason).toBe('user_cancelled');
  expect(GATEWAY_SENDER).toBe('client:gateway');
  // the page folds the owner's `start_job` result with the projection, whose `foldOwnerJobs`
  // derives the job's ID (a SHA-256: the bundle carries a synchronous one, scripts/build-web.mjs)
  expect(errors, 'the page threw while folding the tree').toEqual([]);
  await page.close();
}, 120_000);
