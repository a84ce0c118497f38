// Compaction on the page, against the real thing: an `actorloop host` and an `actorloop serve` on
// one nats-server, and a run (the CLI) whose ten 4 KB tool results outgrow an 8,000-token window,
// so it compacts its closed steps into a checkpoint. In headless Chromium: the timeline marks the
// checkpoint with the tokens it saved and draws the summary's attempt apart from the step's own,
// the legend names both; back in time at the compaction, the step's chart lights `compacting`;
// the Compact button sends `turn.compact` and says so, the agent's log receives a `compact`
// message, and its next turn (a follow-up sent from the page) compacts as asked.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, expect, test } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { cliEnv, lines, parseEvents } from '../helpers/cli.js';
import { tempDir } from '../helpers/nats.js';
import { until, useRealStack, type Served, type Started } from './real-stack.js';

const stack = useRealStack('page-compaction');
let host: Started;
let serve: Served;
let agentId = '';
let common: string[] = [];
let script = '';
let ws = '';

/** The agent's log as `actorloop events --json` prints it. */
async function log(of = agentId): Promise<ActorEvent[]> {
  const r = await stack.pool.forFile(cliEnv(stack.dataDir)).run(['events', of, '--json', ...common]);
  return parseEvents(r.stdout);
}

beforeAll(async () => {
  ws = await tempDir('page-compaction-ws');
  const scripts = await tempDir('page-compaction-script');
  stack.dirs.push(ws, scripts);
  for (let i = 0; i < 10; i++) await writeFile(join(ws, `f${i}.txt`), `file ${i}: ${'filler text of the workspace '.repeat(150)}`.slice(0, 4096));
  script = join(scripts, 'compaction.json');
  const responses = [
    ...Array.from({ length: 10 }, (_, i) => ({ tool_calls: [{ id: `c${i}`, name: 'read_file', arguments: { path: `f${i}.txt` } }] })),
    { content: 'Read all ten files.' },
    { content: 'Nothing else to add.' },
  ];
  // one summary for each compaction: the two the window makes, then the one the Compact button asks for
  const summaries = ['Read f0.txt to f5.txt: each is filler text.', 'Read f0.txt to f6.txt: each is filler text.', 'Read all ten files f0.txt to f9.txt: each is filler text.'];
  await writeFile(script, JSON.stringify({ responses, summaries }));
  host = stack.start(['host', '--name', 'compaction-host', '--lease-ttl', '10000']);
  await until('the host to start', () => host.err().includes('hosting agents'));
  serve = await stack.serve();
  common = ['--nats', stack.nats.url, '--data-dir', stack.dataDir];
  const r = await stack.pool.forFile(cliEnv(stack.dataDir)).run([
    'run', 'Read every file and say what they hold', '--model', `scripted:${script}`, '--tools', 'read_file', '--cwd', ws, '-c', 'context_window=8000', ...common,
  ]);
  agentId = [...lines(r.stdout), ...lines(r.stderr)].find((l) => /^agt_\S+$/.test(l)) ?? '';
  if (agentId === '' || r.code !== 0) throw new Error(`the run did not complete: ${r.code}\n${r.stdout}\n${r.stderr}`);
}, 120_000);

test('the timeline marks the checkpoint with the tokens it saved, the summary attempt apart; back in time the step lights compacting', async () => {
  const events = await log();
  const committed = events.filter((e): e is Extract<ActorEvent, { type: 'checkpoint/committed' }> => e.type === 'checkpoint/committed');
  expect(committed.length).toBeGreaterThan(0);
  const page = await stack.browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${serve.pageUrl}&actor=${agentId}`);
  const marks = page.locator('.timeline g.mark[data-mark="checkpoint"]');
  await until('a checkpoint mark on the timeline', async () => (await marks.count()) === committed.length);
  const first = committed[0]!.data;
  expect(await marks.first().locator('title').textContent()).toBe(
    `checkpoint −${first.tokensBefore - first.tokensAfter} tokens (${first.tokensBefore} → ${first.tokensAfter}) · ${first.id}`);
  expect(first.tokensBefore).toBeGreaterThan(first.tokensAfter);
  // the summary's attempt is drawn, and named, apart from the step's model attempts
  const summaries = page.locator('.timeline rect.bar[data-kind="summary"]');
  expect(await summaries.count()).toBe(events.filter((e) => e.type === 'attempt/start' && e.data.kind === 'compaction').length);
  expect(await summaries.first().locator('title').textContent()).toMatch(/^summary \(compaction\) attempt \d+: \d+ ms$/);
  const legend = await page.getByTestId('timeline-legend').textContent();
  expect(legend).toContain('summary attempt (compaction)');
  expect(legend).toContain('checkpoint (compacted)');
  expect(legend).toContain('compaction refused, step ended');
  // back in time to the compaction's start (one actor: its stream is its log), the step compacts
  const at = events.findIndex((e) => e.type === 'compaction/started') + 1;
  await page.goto(`${serve.url}?actor=${agentId}&at=${at}`);
  await until('the position of the compaction', async () => ((await page.getByTestId('position').textContent()) ?? '').includes('compaction/started'));
  const step = page.locator('figure.chart[data-machine="step"]');
  await until('the step chart to light compacting', async () => (await step.getAttribute('data-active-state').catch(() => null)) === 'compacting');
  await until('its compacting state lit', async () => (await step.locator('g[data-active="true"]').evaluateAll((gs) => gs.map((g) => g.getAttribute('data-state')))).some((s) => s?.endsWith('compacting')));
  // and once the summary's attempt started, still compacting, its attempt named the summary's
  await page.goto(`${serve.url}?actor=${agentId}&at=${at + 1}`);
  await until('the summary attempt\'s start', async () => ((await page.getByTestId('position').textContent()) ?? '').includes('attempt/start'));
  await until('still compacting', async () => (await step.getAttribute('data-active-state').catch(() => null)) === 'compacting');
  expect(await page.locator('figure.chart[data-machine="attempt"]').getAttribute('data-title')).toMatch(/^summary \(compaction\) attempt \d+$/);
  expect(errors).toEqual([]);
  await page.close();
}, 120_000);

test('Compact sends turn.compact and says so; the log receives a compact message, and the next turn compacts as asked', async () => {
  const page = await stack.browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${serve.pageUrl}&actor=${agentId}`);
  await until('the agent to open', async () => (await page.getByTestId('actor-id').textContent().catch(() => '')) === agentId);
  const before = (await log()).filter((e) => e.type === 'checkpoint/committed').length;
  const said = page.getByTestId('rpc-said');
  await page.getByRole('button', { name: 'Compact', exact: true }).click();
  await until('the page to say what Compact did', async () => /^compact sent \(msg_\S+\): /.test((await said.textContent()) ?? ''));
  const text = (await said.textContent())!;
  // idle: it compacts when its next turn starts
  expect(text).toMatch(/has no open turn, it compacts at the first step of its next turn$/);
  const messageId = /\((msg_\S+)\)/.exec(text)![1]!;
  // a follow-up from the page starts that turn
  await page.getByLabel('message kind').selectOption('follow_up');
  await page.getByLabel('message', { exact: true }).fill('anything else?');
  await page.getByRole('button', { name: 'Send', exact: true }).click();
  let events: ActorEvent[] = [];
  await until('the follow-up turn to end', async () => (events = await log()).filter((e) => e.type === 'turn/end').length === 2, 60_000);
  const received = events.find((e) => e.type === 'inbox/received' && e.data.messageId === messageId);
  expect(received?.type === 'inbox/received' && received.data.kind).toBe('compact');
  const asked = events.filter((e) => e.type === 'compaction/started' && e.data.trigger === 'asked');
  expect(asked.map((e) => e.type === 'compaction/started' && e.data.messageId)).toEqual([messageId]);
  // the ask made one more checkpoint, and the page, open all along, marks it live
  const after = events.filter((e) => e.type === 'checkpoint/committed').length;
  expect(after).toBe(before + 1);
  await until('the page to mark the new checkpoint', async () => (await page.locator('.timeline g.mark[data-mark="checkpoint"]').count()) === after);
  expect(errors).toEqual([]);
  await page.close();
}, 120_000);

test('a compaction refused that ends its step is marked, with its reason', async () => {
  // a task larger than the smallest window: its first step has no closed step to compact
  const task = `Read f0.txt, with all of this in mind: ${'a long preamble of the task '.repeat(300)}`;
  const r = await stack.pool.forFile(cliEnv(stack.dataDir)).run([
    'run', task, '--model', `scripted:${script}`, '--tools', 'read_file', '--cwd', ws, '-c', 'context_window=1024', ...common,
  ]);
  const id = [...lines(r.stdout), ...lines(r.stderr)].find((l) => /^agt_\S+$/.test(l)) ?? '';
  expect(id, `${r.stdout}\n${r.stderr}`).not.toBe('');
  const rejected = (await log(id)).filter((e): e is Extract<ActorEvent, { type: 'compaction/rejected' }> => e.type === 'compaction/rejected' && e.data.endsStep);
  expect(rejected.length, `${r.stdout}\n${r.stderr}`).toBe(1);
  const page = await stack.browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(`${serve.pageUrl}&actor=${id}`);
  const mark = page.locator('.timeline g.mark[data-mark="compaction-rejected"]');
  await until('the refusal marked on the timeline', async () => (await mark.count()) === 1);
  expect(await mark.locator('title').textContent()).toBe(`compaction refused (${rejected[0]!.data.reason}): ${rejected[0]!.data.message}`);
  await page.close();
}, 120_000);
