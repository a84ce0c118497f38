import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from '../helpers/browser.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import { approvalMessage } from '../../src/client/messages.js';
import type { Supervisor } from '../../src/actors/hosting/supervisor.js';
import { machineDefinitions } from '../../src/client/machine-definitions.js';
import { tempDir } from '../helpers/nats.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { answer, call, treeModels } from '../helpers/scripted-tree.js';
import { actorTestWorld, startTurn } from '../actors/harness.js';
import { startPageServer, type PageServer } from './page-server.js';

// The visualizer page in a real browser (the machine's Chromium, headless), against a stand-in for the
// gateway serving a real run: a parent that asks a foreground child to read a file, then writes
// one, which under `--approve ask` parks for a person. Each step saves a screenshot.

const root = join(import.meta.dirname, '..', '..');
const world = actorTestWorld();
// one runtime for the file: its tests are the steps of one run, watched from one page
const shared = world.shared(() => ({
  modelFor: treeModels({
    main: [
      call('spawn_agent', { task: 'read src/a.txt and say its first line', name: 'reader', mode: 'foreground' }),
      call('write_file', { path: 'out.txt', content: 'alpha\n' }),
      answer('wrote out.txt'),
    ],
    reader: [call('read_file', { path: 'src/a.txt' }), answer('the first line is alpha')],
  }),
}));
let sup: Supervisor;
let actor: AgentActor;
let server: PageServer;
let browser: Browser;
let page: Page;
let shots: string;
const errors: string[] = [];
const requests: string[] = [];
const TOKEN = 'page-test-token';

async function shot(name: string): Promise<void> {
  const path = join(shots, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  process.stdout.write(`screenshot: ${path}\n`);
}

/** The chart of the write_file call. */
const writeCall = () => page.locator('figure[data-machine="tool-call"][data-title*="write_file"]');

beforeAll(async () => {
  await promisify(execFile)(process.execPath, [join(root, 'scripts', 'build-web.mjs')]);
  shots = await tempDir('page-shots');
  sup = shared.rt.supervisor();
  ({ actor } = await startTurn(sup, 'investigate and write', turnRequest(world.ws, { approvalMode: 'ask' })));
  await actor.whenAwaitingApproval();
  server = await startPageServer({
    reader: sup.reader, rootId: actor.rootId, webDir: join(root, 'dist', 'web'), token: TOKEN,
    // an approval goes to the agent's inbox as the CLI's would: the run goes on live under the page
    async onRpc(r) {
      if (r.method === 'approval.respond') {
        const p = r.params as { agentId: string; approvalId: string; planDigest: string; decision: 'approve' | 'deny'; reason?: string };
        const answer = p.decision === 'approve' ? { decision: 'approve' as const, always: false } : { decision: 'deny' as const, reason: p.reason ?? null };
        await sup.send(approvalMessage(p.agentId, p.approvalId, p.planDigest, answer));
      }
      return { accepted: true };
    },
  });
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1500, height: 1100 } });
  // a locator that matches nothing fails the test soon, not at the test's own timeout
  page.setDefaultTimeout(5_000);
  page.on('request', (r) => void requests.push(r.url()));
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => void (m.type() === 'error' && errors.push(m.text())));
  await page.goto(`${server.url}/?token=${TOKEN}&actor=${actor.actorId}`);
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

describe('the visualizer page', () => {
  it('shows the tree with each agent\'s status, tokens and cost, its requests carrying the token in the cookie and none in a URL', async () => {
    const main = page.locator('li.actor[data-name="main"]');
    const reader = page.locator('li.actor[data-name="reader"]');
    await expect.poll(() => main.getAttribute('data-status')).toBe('waiting_approval');
    await expect.poll(() => reader.getAttribute('data-status')).toBe('completed');
    expect(await main.locator('.usage').textContent()).toMatch(/\d+ tok/);
    expect(await page.getByTestId('tree-total').textContent()).toContain('2 actors');
    await shot('tree');
    expect(server.refused).toEqual([]);
    // opened once with ?token=: the address bar and every later request (fetch, EventSource, WebSocket) are without it
    expect(page.url()).toBe(`${server.url}/?actor=${actor.actorId}`);
    expect(requests.slice(1).filter((u) => u.includes('token='))).toEqual([]);
  });

  it('draws the selected agent\'s statecharts from the machine definitions, with the call parked for approval lit', async () => {
    await page.locator('li.actor[data-name="main"]').click();
    const charts = page.locator('figure.chart');
    await expect.poll(async () => charts.evaluateAll((fs) => fs.map((f) => f.getAttribute('data-machine')))).toEqual(
      expect.arrayContaining(['agent', 'turn', 'step', 'attempt', 'tool-call']),
    );
    await expect.poll(() => writeCall().getAttribute('data-active-state')).toBe('awaiting_approval.waiting');
    // the lit states are the drawn ones: the compound state and its child
    await expect.poll(() => writeCall().locator('g.state.active[data-state="awaiting_approval.waiting"]').count()).toBe(1);
    expect(await writeCall().locator('g[data-state="awaiting_approval"]').getAttribute('data-active')).toBe('true');
    expect(await writeCall().locator('g[data-state="started"]').getAttribute('data-active')).toBe('false');
    // every state of the definition is drawn
    const def = machineDefinitions().machines.find((m) => m.id === 'tool-call')!;
    expect(await writeCall().locator('g.state').count()).toBeGreaterThanOrEqual(Object.keys(def.states).length);
    expect(await page.locator('figure[data-machine="step"]').getAttribute('data-active-state')).toBe('tools');
    await shot('statecharts');
  });

  it('filters the event list by type and opens an event\'s JSON', async () => {
    const rows = page.locator('li.event');
    const all = await rows.count();
    await page.getByLabel('event type').selectOption('tool/call');
    await expect.poll(() => rows.evaluateAll((ls) => ls.map((l) => l.getAttribute('data-type')))).toEqual(['tool/call', 'tool/call']);
    expect(all).toBeGreaterThan(2);
    await rows.last().locator('button').click();
    expect(await rows.last().locator('pre.json').textContent()).toContain('"name": "write_file"');
    await shot('events');
    await page.getByLabel('event type').selectOption('');
  });

  it('sends a steer typed in the page as inbox.send', async () => {
    await page.getByLabel('message', { exact: true }).fill('also mention beta');
    await page.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => server.rpc.find((r) => r.method === 'inbox.send')?.params).toEqual({ agentId: actor.actorId, kind: 'steer', content: 'also mention beta' });
    expect(await page.getByLabel('message', { exact: true }).inputValue()).toBe('');
    await shot('steer');
    // no kill without --allow-faults
    expect(await page.getByRole('button', { name: 'Kill host' }).count()).toBe(0);
  });

  it('picks a dropped stream up from its last event: no gap, no duplicate', async () => {
    const seqs = () => page.locator('li.event').evaluateAll((ls) => ls.map((l) => Number(l.getAttribute('data-seq'))));
    const before = await seqs();
    server.dropStreams();
    await expect.poll(() => server.resumedFrom.length).toBe(2);
    expect(Number(server.resumedFrom[1])).toBeGreaterThan(0);
    await expect.poll(() => page.locator('.conn').textContent()).toBe('live stream');
    expect(await seqs()).toEqual(before);
    expect(before).toEqual(before.map((_, i) => i + 1));
  });

  it('approves the pending call with its ID and plan digest; the tool runs and the turn completes', async () => {
    const pending = actor.projection.approvals!;
    const [approvalId, record] = Object.entries(pending).find(([, a]) => a.state === 'pending')!;
    expect(await page.locator('.approval .digest').getAttribute('data-digest')).toBe(record.planDigest);
    expect(await page.locator('.approval').textContent()).toContain('write_file');
    await page.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => server.rpc.find((r) => r.method === 'approval.respond')?.params).toEqual({
      agentId: actor.actorId, approvalId, decision: 'approve', planDigest: record.planDigest,
    });
    await expect.poll(() => writeCall().getAttribute('data-active-state'), { timeout: 15_000 }).toBe('result');
    await expect.poll(() => page.locator('li.actor[data-name="main"]').getAttribute('data-status'), { timeout: 15_000 }).toBe('completed');
    // the event that moved the call flashes the transition it took (tool/result, from any state)
    expect(await writeCall().locator('g.edge.flash[data-to="result"]').count()).toBe(1);
    // the whole run reached the page once: its events are the log's, in order
    const log = await readLog(sup, actor.rootId, actor.actorId);
    await expect.poll(() => page.locator('li.event').evaluateAll((ls) => ls.map((l) => Number(l.getAttribute('data-seq'))))).toEqual(log.map((e) => e.seq));
    await shot('approved');
  });

  it('draws the timeline: a lane per agent with turns, steps, attempts, tool calls and the wait', async () => {
    await expect.poll(() => page.locator('.timeline g.lane').count()).toBe(2);
    const kinds = await page.locator('.timeline g.lane').first().locator('rect.bar').evaluateAll((rs) => [...new Set(rs.map((r) => r.getAttribute('data-kind')))]);
    expect(kinds.sort()).toEqual(['attempt', 'step', 'tool', 'turn', 'wait']);
    await shot('timeline');
  });

  it('travels back in time: the call parked again and not started, then live returns to now', async () => {
    const slider = page.getByLabel('time travel');
    const types = await page.locator('li.event').evaluateAll((ls) => ls.map((l) => l.getAttribute('data-type')));
    expect(types).toContain('approval/requested');
    const max = Number(await slider.getAttribute('max'));
    // walk back until the write_file call is parked: the state at each position is folded from the log up to it
    let at = max - 1;
    for (; at > 0; at--) {
      await slider.fill(String(at));
      if ((await writeCall().count()) === 1 && (await writeCall().getAttribute('data-active-state')) === 'awaiting_approval.waiting') break;
    }
    expect(at).toBeGreaterThan(0);
    expect(await page.getByTestId('position').textContent()).toContain(`at ${at}/${max}`);
    expect(await writeCall().locator('g[data-state="started"]').getAttribute('data-active')).toBe('false');
    // the log at that position has the turn open and parked (or its answer just received): not completed
    expect(['waiting_approval', 'running']).toContain(await page.locator('li.actor[data-name="main"]').getAttribute('data-status'));
    await shot('time-travel');
    await page.getByRole('button', { name: 'Live' }).click();
    await expect.poll(() => writeCall().getAttribute('data-active-state')).toBe('result');
    expect(await page.getByTestId('position').textContent()).toContain('live');
  });

  it('offers kill when the gateway allows faults, and sends fault.kill for the selected agent', async () => {
    server.faultsAllowed = true;
    await page.reload();
    await page.locator('li.actor[data-name="reader"]').click();
    await page.getByRole('button', { name: 'Kill host' }).click();
    const reader = await page.locator('li.actor[data-name="reader"]').getAttribute('data-actor');
    await expect.poll(() => server.rpc.find((r) => r.method === 'fault.kill')?.params).toEqual({ agentId: reader });
    // or at a fault point the agent reaches next, the points as the gateway's schema lists them
    const at = page.getByRole('combobox', { name: 'kill at' });
    await expect.poll(async () => (await at.locator('option').allTextContents()).length).toBeGreaterThan(10);
    expect(await at.locator('option').allTextContents()).toEqual(expect.arrayContaining(['now', 'at after:tool/start', 'at before:notice-ack']));
    await at.selectOption('after:tool/start');
    await page.getByRole('button', { name: 'Kill host' }).click();
    await expect.poll(() => server.rpc.filter((r) => r.method === 'fault.kill').at(-1)?.params).toEqual({ agentId: reader, point: 'after:tool/start' });
    await shot('kill');
  });

  it('says so when ?actor= names no actor, with every tree still shown to pick from', async () => {
    const other = await browser.newPage({ viewport: { width: 1500, height: 1100 } });
    other.setDefaultTimeout(5_000);
    other.on('pageerror', (e) => errors.push(e.message));
    other.on('console', (m) => void (m.type() === 'error' && errors.push(m.text())));
    const bogus = 'agt_01J0000000000000000NOSUCH';
    try {
      await other.goto(`${server.url}/?actor=${bogus}&token=${TOKEN}`);
      const notice = other.getByTestId('unknown-actor');
      await notice.waitFor();
      expect(await notice.textContent()).toBe(`no actor ${bogus} here; pick one from the tree, or open the runs list`);
      await expect.poll(() => other.locator('li.actor').count()).toBe(2);
      expect(await other.locator('.conn').textContent()).toBe('no tree followed');
      const path = join(shots, 'unknown-actor.png');
      await other.screenshot({ path, fullPage: true });
      process.stdout.write(`screenshot: ${path}\n`);
      // picking one follows its tree
      await other.locator('li.actor[data-name="main"]').click();
      await expect.poll(() => notice.count()).toBe(0);
      await expect.poll(() => other.locator('.conn').textContent()).toBe('live stream');
      await expect.poll(() => other.locator('li.event').count()).toBeGreaterThan(2);
    } finally {
      await other.close();
    }
  });

  it('raised no error in the page, and asked nothing of anyone but the gateway (offline: no CDN, no fonts)', () => {
    expect(errors).toEqual([]);
    expect(requests.length).toBeGreaterThan(3);
    expect(requests.filter((u) => !u.startsWith(`${server.url}/`) && !u.startsWith(server.url.replace('http', 'ws')) && !u.startsWith('data:'))).toEqual([]);
  });
});
