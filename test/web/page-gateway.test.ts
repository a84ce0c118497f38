// The page against the real thing: an `actorloop host` and an `actorloop serve` process on one
// nats-server, a subagent tree whose child's write needs approval. In headless chromium the tree
// shows the child waiting for approval, its tool call's statechart lights awaiting_approval,
// clicking Approve sends the answer through the gateway's JSON-RPC, the tool runs and the tree
// completes; the investigators demo shows its three children, their turns overlapping on the
// timeline, and their notices; a steer typed in the page is included in the agent's next step;
// a host SIGKILLed from the page shows its agent killed, recovering, then running on a second
// host. The page is opened once with the URL serve printed (its token), and no URL it asks for
// after that carries the token. Screenshots are saved under each test's temp dir (their paths
// printed).
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { cliEnv, lines, type CliPool } from '../helpers/cli.js';
import { tempDir } from '../helpers/nats.js';
import { until, useRealStack } from './real-stack.js';

const usage = { input_tokens: 40, output_tokens: 4 };
const TREE = {
  agents: {
    main: { responses: [{ tool_calls: [{ name: 'spawn_agent', arguments: { task: 'write notes.txt', name: 'writer', mode: 'foreground' } }], usage }, { content: 'the writer wrote it', usage }] },
    writer: { responses: [{ tool_calls: [{ name: 'write_file', arguments: { path: 'notes.txt', content: 'hello\n' } }], usage }, { content: 'wrote notes.txt', usage }] },
  },
};

const stack = useRealStack('page-gw');
const { start, pool, dirs } = stack;

test('a child\'s approval in the page: the tree shows it waiting, its call lights awaiting_approval, Approve runs the tool and the tree completes', async ({ onTestFinished }) => {
  const ws = await tempDir('page-gw-ws');
  const shots = await tempDir('page-gw-shots');
  dirs.push(ws);
  const script = join(ws, '..', `tree-${Date.now()}.json`);
  await writeFile(script, JSON.stringify(TREE));
  const host = start(['host', '--name', 'page-host', '--lease-ttl', '10000']);
  await until('the host to start', () => host.err().includes('hosting agents'));
  const serve = await stack.serve();
  const { url } = serve;
  // handed to the host; without a terminal the run stops (exit 5) once the tree waits for a person
  const cli = pool.forTest({ onTestFinished }, cliEnv(stack.dataDir));
  const run = await cli.run(['run', 'have a writer write notes.txt', '--model', `scripted:${script}`, '--approve', 'ask', '--cwd', ws, '--nats', stack.nats.url, '--data-dir', stack.dataDir]);
  const rootId = lines(run.stdout)[0]!;
  expect(rootId).toMatch(/^agt_/);
  const page = await stack.browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  // every URL the page asks for after the first: the token must be in none (it rides in the cookie)
  const asked: string[] = [];
  page.on('request', (r) => asked.push(r.url()));
  page.on('websocket', (w) => asked.push(w.url()));
  await page.goto(`${serve.pageUrl}&actor=${rootId}`);
  // the tree: the root, and its child waiting for approval
  await page.getByText('writer', { exact: true }).first().waitFor({ timeout: 30_000 });
  expect(page.url()).toBe(`${url}?actor=${rootId}`);
  expect(asked[0]).toContain('?token=');
  expect(asked.slice(1).filter((u) => u.includes('token')), 'a URL of the page carries the token').toEqual([]);
  // the tree may show from the first reads before the page opens its event stream and its RPC socket
  await until('the page to follow the events and open its RPC socket', async () =>
    asked.some((u) => u.includes('/v1/actors/') && u.includes('/events')) && asked.some((u) => u.startsWith('ws://') && u.endsWith('/v1/rpc')));
  // the token is out of the page's reach: the cookie is HttpOnly
  expect(await page.evaluate('document.cookie')).toBe('');
  // a browser that never had the token gets the page and no data, and is told what to open
  const stranger = await stack.browser.newPage();
  await stranger.goto(`${url}?actor=${rootId}`);
  await until('the stranger\'s page to say it needs the token', async () => (await stranger.textContent('body'))!.includes('this gateway needs its token'));
  expect(await stranger.textContent('body')).not.toContain('writer');
  await stranger.close();
  await until('the child to show as waiting for approval', async () => (await page.textContent('body'))!.includes('waiting approval'));
  await page.screenshot({ path: join(shots, 'waiting.png'), fullPage: true });
  console.log(`screenshot: ${join(shots, 'waiting.png')}`);
  await page.getByText('writer', { exact: true }).first().click();
  await until('the write_file call\'s chart to light awaiting_approval', async () => (await page.textContent('body'))!.includes('awaiting_approval'));
  const approve = page.locator('button.approve').first();
  await approve.waitFor({ timeout: 15_000 });
  await approve.click();
  await until('the file to be written', async () => (await readFile(join(ws, 'notes.txt'), 'utf8').catch(() => '')) === 'hello\n');
  const done = async (): Promise<boolean> => {
    const res = await fetch(`${url}v1/actors`, { headers: serve.auth });
    const { actors } = (await res.json()) as { actors: Array<{ id: string; status: string }> };
    return actors.length === 2 && actors.every((a) => a.status === 'completed');
  };
  await until('the tree to complete', done);
  await page.screenshot({ path: join(shots, 'completed.png'), fullPage: true });
  console.log(`screenshot: ${join(shots, 'completed.png')}`);
  expect(errors).toEqual([]);
  await page.close();
  serve.proc.kill('SIGTERM');
  host.proc.kill('SIGTERM');
}, 120_000);

/** The events of one agent, through the gateway's own SSE would be the page's way; the CLI reads the log. */
async function eventsOf(cli: ReturnType<CliPool['forTest']>, id: string): Promise<Array<{ type: string; data: Record<string, unknown> }>> {
  const r = await cli.run(['events', id, '--json', '--nats', stack.nats.url, '--data-dir', stack.dataDir]);
  return lines(r.stdout).map((l) => JSON.parse(l) as { type: string; data: Record<string, unknown> });
}

test('the investigators demo in the page: the root and its three children, each done, their notices in the root\'s events', async ({ onTestFinished }) => {
  const shots = await tempDir('page-gw-shots');
  const serve = await stack.serve();
  const cli = pool.forTest({ onTestFinished }, cliEnv(stack.dataDir));
  const demo = await cli.run(['demo', 'investigators', '--nats', stack.nats.url, '--data-dir', stack.dataDir]);
  expect(demo.code).toBe(0);
  const rootId = /^(agt_\S+)$/m.exec(demo.stdout)![1]!;
  const page = await stack.browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${serve.pageUrl}&actor=${rootId}`);
  for (const name of ['failure-reader', 'change-reader', 'reproducer']) await page.getByText(name, { exact: true }).first().waitFor({ timeout: 30_000 });
  await until('the tree to read 4 actors', async () => (await page.textContent('body'))!.includes('tree: 4 actors'));
  // the three children ran in parallel: on the timeline, each child's turn started before any ended
  const turns = await Promise.all(['failure-reader', 'change-reader', 'reproducer'].map(async (name) => {
    const id = (await page.locator(`li.actor[data-name="${name}"]`).getAttribute('data-actor'))!;
    const bar = page.locator(`.timeline g.lane[data-actor="${id}"] rect.bar[data-kind="turn"]`).first();
    await bar.waitFor({ timeout: 30_000 });
    await until(`${name}'s turn bar to close`, async () => (await bar.getAttribute('data-to')) !== '');
    return { name, from: Number(await bar.getAttribute('data-from')), to: Number(await bar.getAttribute('data-to')) };
  }));
  const lastStart = Math.max(...turns.map((t) => t.from));
  const firstEnd = Math.min(...turns.map((t) => t.to));
  expect(lastStart, JSON.stringify(turns)).toBeLessThan(firstEnd);
  // the children's notices and reports reached the root: its event list holds them
  await page.selectOption('select', { label: 'inbox/received' }).catch(() => {});
  const text = (await page.textContent('body'))!;
  expect(text).toContain('inbox/received');
  const rootEvents = await eventsOf(cli, rootId);
  const notices = rootEvents.filter((e) => e.type === 'inbox/received' && e.data.kind === 'subagent_completed');
  expect(notices).toHaveLength(3);
  await page.screenshot({ path: join(shots, 'investigators.png'), fullPage: true });
  console.log(`screenshot: ${join(shots, 'investigators.png')}`);
  expect(errors).toEqual([]);
  await page.close();
  serve.proc.kill('SIGTERM');
}, 120_000);

test('a steer typed in the page is included in the agent\'s next step', async ({ onTestFinished }) => {
  const ws = await tempDir('page-gw-ws');
  const shots = await tempDir('page-gw-shots');
  dirs.push(ws);
  const script = join(ws, '..', `steer-${Date.now()}.json`);
  // the first answer takes its time: the steer arrives while it streams and the next step takes it
  await writeFile(script, JSON.stringify({ responses: [
    { tool_calls: [{ name: 'list_dir', arguments: { path: '.' } }], delay_ms: 4000, usage },
    { content: 'steered', usage },
  ] }));
  const host = start(['host', '--name', 'steer-host', '--lease-ttl', '10000']);
  await until('the host to start', () => host.err().includes('hosting agents'));
  const serve = await stack.serve();
  const cli = pool.forTest({ onTestFinished }, cliEnv(stack.dataDir));
  const run = start(['run', 'list the workspace', '--model', `scripted:${script}`, '--cwd', ws]);
  await until('the run to print its agent', () => /^agt_/m.test(run.out()));
  const agentId = /^(agt_\S+)$/m.exec(run.out())![1]!;
  const page = await stack.browser.newPage({ viewport: { width: 1400, height: 1000 } });
  await page.goto(`${serve.pageUrl}&actor=${agentId}`);
  const input = page.locator('form.steer input');
  await input.waitFor({ timeout: 30_000 });
  await until('the page to be live', async () => !(await page.locator('form.steer button').isDisabled()));
  await input.fill('look at src first');
  await page.locator('form.steer button').click();
  await until('the turn to end', async () => (await eventsOf(cli, agentId)).some((e) => e.type === 'turn/end'), 60_000);
  const events = await eventsOf(cli, agentId);
  const steer = events.find((e) => e.type === 'inbox/received' && e.data.kind === 'steer')!;
  expect(steer.data.content).toBe('look at src first');
  // the request of step 2 includes it
  const included = events.filter((e) => e.type === 'request/prepared').flatMap((e) => (e.data.messageIds as string[] | undefined) ?? []);
  expect(included).toContain(steer.data.messageId);
  await page.screenshot({ path: join(shots, 'steered.png'), fullPage: true });
  console.log(`screenshot: ${join(shots, 'steered.png')}`);
  await page.close();
  serve.proc.kill('SIGTERM');
  host.proc.kill('SIGTERM');
}, 120_000);

/** What the kill test uses of the page's globals. */
interface InPage {
  badges: string[];
  document: { querySelector(selector: string): { getAttribute(name: string): string | null } | null };
}

test('kill from the page SIGKILLs the host, and the page shows the takeover by a second host', async ({ onTestFinished }) => {
  const ws = await tempDir('page-gw-ws');
  const shots = await tempDir('page-gw-shots');
  dirs.push(ws);
  const script = join(ws, '..', `kill-${Date.now()}.json`);
  // the first answer waits long enough for the page to load and the kill (a loaded machine takes
  // seconds); the host that takes over answers it again, as slowly: the page sees it run there
  await writeFile(script, JSON.stringify({ responses: [{ content: 'survived the kill', delay_ms: 12_000, usage }] }));
  const a = start(['host', '--name', 'kill-host-a', '--lease-ttl', '2000', '--allow-faults']);
  await until('host A to start', () => a.err().includes('hosting agents'));
  const serve = await stack.serve(['--allow-faults']);
  const cli = pool.forTest({ onTestFinished }, cliEnv(stack.dataDir));
  const run = start(['run', 'answer slowly', '--model', `scripted:${script}`, '--cwd', ws]);
  await until('the run to print its agent', () => /^agt_/m.test(run.out()));
  const agentId = /^(agt_\S+)$/m.exec(run.out())![1]!;
  await until('host A to take the agent', async () => (await eventsOf(cli, agentId)).some((e) => e.type === 'attempt/start'));
  const page = await stack.browser.newPage({ viewport: { width: 1400, height: 1000 } });
  await page.goto(`${serve.pageUrl}&actor=${agentId}`);
  const kill = page.locator('button.kill');
  await kill.waitFor({ timeout: 30_000 });
  await until('the page to be live', async () => !(await kill.isDisabled()));
  const row = page.locator(`li.actor[data-actor="${agentId}"]`);
  await until('the badge to say running', async () => (await row.getAttribute('data-status')) === 'running');
  // every badge the row shows from now on, read every 50 ms in the page
  await page.evaluate((id) => {
    const seen: string[] = [];
    // the test's tsconfig has no DOM types: the page's globals, as far as this uses them
    const g = globalThis as unknown as InPage;
    g.badges = seen;
    setInterval(() => {
      const s = g.document.querySelector(`li.actor[data-actor="${id}"]`)?.getAttribute('data-status');
      if (s && seen[seen.length - 1] !== s) seen.push(s);
    }, 50);
  }, agentId);
  await kill.click();
  await until('host A to die by SIGKILL', () => a.proc.signalCode === 'SIGKILL');
  // nothing is committed by a death: the gateway sees A's host record name a process that is gone
  await until('the badge to say killed', async () => (await row.getAttribute('data-status')) === 'killed');
  await page.screenshot({ path: join(shots, 'killed.png'), fullPage: true });
  console.log(`screenshot: ${join(shots, 'killed.png')}`);
  // a second host takes the agent over once A's lease lapses, and carries the turn on
  const b = start(['host', '--name', 'kill-host-b', '--lease-ttl', '2000']);
  await until('host B to start', () => b.err().includes('hosting agents'));
  await until('the turn to end on host B', async () => (await eventsOf(cli, agentId)).some((e) => e.type === 'turn/end'), 60_000);
  const events = await eventsOf(cli, agentId);
  expect(events.some((e) => e.type === 'actor/killed')).toBe(true);
  expect(events.some((e) => e.type === 'actor/rehydrated')).toBe(true);
  // the page followed it: the kill and the recovery are in its event list, the turn's end too
  await until('the page to show the takeover', async () => {
    const text = (await page.textContent('body'))!;
    return text.includes('actor/killed') && text.includes('actor/rehydrated') && text.includes('turn/end');
  });
  await until('the badge to say completed', async () => (await row.getAttribute('data-status')) === 'completed');
  // the badges shown: killed, then running again (on B) or done; recovering lasts milliseconds
  // and is seen in the status history the page keeps (its own fold of each event as it came)
  const badges = await page.evaluate(() => (globalThis as unknown as InPage).badges);
  const killedAt = badges.indexOf('killed');
  expect(killedAt, badges.join(' ')).toBeGreaterThanOrEqual(0);
  expect(badges.slice(killedAt + 1).some((s) => s === 'running' || s === 'completed'), badges.join(' ')).toBe(true);
  // the history has the kill, then the run on B; the recovery between them when the page folded
  // the takeover's commit before a gateway read spoke for all of it (a read of the whole commit
  // makes the fold's notes of the events inside it stale: the history never steps back)
  const history = (await row.getAttribute('data-history'))!.split(' ');
  const k = history.indexOf('killed');
  expect(k, history.join(' ')).toBeGreaterThanOrEqual(0);
  const after = history.slice(k + 1);
  expect(after.some((s) => s === 'running' || s === 'completed'), history.join(' ')).toBe(true);
  expect(after.filter((s) => s !== 'recovering' && s !== 'running' && s !== 'completed'), history.join(' ')).toEqual([]);
  if (after.includes('recovering')) expect(after.indexOf('recovering'), history.join(' ')).toBe(0);
  expect(await page.getByTestId('status-history').textContent()).toContain('killed → ');
  console.log(`badges seen: ${badges.join(' ')}; status history: ${history.join(' ')}`);
  await page.screenshot({ path: join(shots, 'takeover.png'), fullPage: true });
  console.log(`screenshot: ${join(shots, 'takeover.png')}`);
  await page.close();
  serve.proc.kill('SIGTERM');
  b.proc.kill('SIGTERM');
}, 120_000);
