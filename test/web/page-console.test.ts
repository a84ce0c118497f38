// The page as an operator's console, against the real thing: an `actorloop host` and an
// `actorloop serve` on one nats-server, three runs made by the CLI (one stopped by its step
// budget, one failed by its model, one tree whose child's write waits on an approval). In headless
// Chromium: the runs list opens first, newest first, each run with its task text and status, the
// approval that waits in "Needs you" above it, filters by status and text, and opens a run on
// click; on the waiting tree's page at 1600×1000 the Approve button is on the first screen, and
// clicking it runs the write and the tree completes; an actor's summary shows its ID as text and
// the reason it stopped or failed in words; the URL follows the selection and the time-travel
// position, and a fresh page opened at it shows the same; nothing scrolls sideways at 1280×800.
// Screenshots go to each test's temp dir (their paths printed; the docs' ones are these).
import { copyFile, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { beforeAll, expect, test } from 'vitest';
import { cliEnv, lines } from '../helpers/cli.js';
import { tempDir } from '../helpers/nats.js';
import { until, useRealStack, type Served, type Started } from './real-stack.js';

const usage = { input_tokens: 40, output_tokens: 4 };
const TREE = {
  agents: {
    main: { responses: [{ tool_calls: [{ name: 'spawn_agent', arguments: { task: 'write notes.txt', name: 'writer', mode: 'foreground' } }], usage }, { content: 'the writer wrote it', usage }] },
    writer: { responses: [{ tool_calls: [{ name: 'write_file', arguments: { path: 'notes.txt', content: 'hello\n' } }], usage }, { content: 'wrote notes.txt', usage }] },
  },
};
/** Two steps of reading where the run may take one: it stops on its step budget. */
const TWO_READS = { responses: [
  { tool_calls: [{ name: 'read_file', arguments: { path: 'a.txt' } }], usage },
  { tool_calls: [{ name: 'read_file', arguments: { path: 'a.txt' } }], usage },
  { content: 'read it twice', usage },
] };
/** A model whose request no longer fits: the turn fails. */
const OVERFLOW = { responses: [{ error: { type: 'context_overflow' } }] };

const stack = useRealStack('page-console');
let host: Started;
let serve: Served;
let ws: string;
let shots: string;
const runs = { stopped: '', failed: '', tree: '' };

async function script(name: string, body: unknown): Promise<string> {
  const file = join(ws, '..', `${name}-${Date.now()}.json`);
  await writeFile(file, JSON.stringify(body));
  return `scripted:${file}`;
}

/** The first screen as an operator sees it; `ACTORLOOP_DOCS_SHOTS=<dir>` keeps a copy there (how docs/console-*.png are made). */
async function shot(page: Page, name: string): Promise<void> {
  const path = join(shots, `${name}.png`);
  await page.screenshot({ path, fullPage: false });
  console.log(`screenshot: ${path}`);
  const docs = process.env.ACTORLOOP_DOCS_SHOTS;
  if (docs) await copyFile(path, join(docs, `${name}.png`));
}

/** True when the page is wider than its viewport: it would scroll sideways. */
const scrollsSideways = (page: Page): Promise<boolean> =>
  page.evaluate('document.scrollingElement.scrollWidth > document.scrollingElement.clientWidth') as Promise<boolean>;

/** Each status of the gateway's `GET /v1/actors`, by actor ID. */
async function statuses(): Promise<Map<string, string>> {
  const res = await fetch(`${serve.url}v1/actors`, { headers: serve.auth });
  const { actors } = (await res.json()) as { actors: Array<{ id: string; status: string }> };
  return new Map(actors.map((a) => [a.id, a.status]));
}

beforeAll(async () => {
  ws = await tempDir('page-console-ws');
  shots = await tempDir('page-console-shots');
  stack.dirs.push(ws, shots);
  await writeFile(join(ws, 'a.txt'), 'alpha\n');
  host = stack.start(['host', '--name', 'console-host', '--lease-ttl', '10000']);
  await until('the host to start', () => host.err().includes('hosting agents'));
  serve = await stack.serve();
  const cli = stack.pool.forFile(cliEnv(stack.dataDir));
  const common = ['--cwd', ws, '--nats', stack.nats.url, '--data-dir', stack.dataDir];
  const run = async (args: string[]): Promise<string> => {
    const r = await cli.run(['run', ...args, ...common]);
    const id = lines(r.stdout).find((l) => l.startsWith('agt_'));
    if (!id) throw new Error(`run printed no agent: ${r.stdout}\n${r.stderr}`);
    return id;
  };
  runs.stopped = await run(['read a.txt twice\nand say what it holds', '--model', await script('two-reads', TWO_READS), '--max-steps', '1']);
  runs.failed = await run(['summarise the whole history', '--model', await script('overflow', OVERFLOW)]);
  runs.tree = await run(['have a writer write notes.txt', '--model', await script('tree', TREE), '--approve', 'ask']);
  await until('the writer to wait on its approval', async () => [...(await statuses()).values()].includes('waiting'));
}, 120_000);

test('the runs list opens first: newest first with task and status, what waits on a person above it, filters, and a run opens on click', async () => {
  const page = await stack.browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(serve.pageUrl);
  const rows = page.locator('tr.run');
  await until('three runs listed', async () => (await rows.count()) === 3);
  // newest first: the tree, the failed, the stopped
  expect(await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute('data-run')))).toEqual([runs.tree, runs.failed, runs.stopped]);
  // the task's first line identifies each run
  expect(await page.locator(`tr.run[data-run="${runs.stopped}"] td.task`).textContent()).toBe('read a.txt twice');
  expect(await page.locator(`tr.run[data-run="${runs.tree}"] td.task`).textContent()).toBe('have a writer write notes.txt');
  expect(await page.locator(`tr.run[data-run="${runs.stopped}"]`).getAttribute('data-status')).toBe('stopped');
  expect(await page.locator(`tr.run[data-run="${runs.stopped}"] .run-reason`).textContent()).toBe('step_budget');
  expect(await page.locator(`tr.run[data-run="${runs.failed}"]`).getAttribute('data-status')).toBe('failed');
  expect(await page.locator(`tr.run[data-run="${runs.tree}"]`).getAttribute('data-status')).toBe('waiting');
  expect(await page.locator(`tr.run[data-run="${runs.tree}"]`).textContent()).toContain('approval for writer');
  // the IDs are text to copy
  expect(await page.locator(`tr.run[data-run="${runs.failed}"] code.id`).textContent()).toBe(runs.failed);
  // what waits on a person, anywhere, above the list; the title counts it
  const approval = page.locator('.needs-you li.approval');
  await until('the approval to show in Needs you', async () => (await approval.count()) === 1);
  expect(await approval.textContent()).toContain('writer');
  expect(await approval.textContent()).toContain('notes.txt');
  expect(await page.title()).toMatch(/^\(1\) actorloop/);
  expect(await scrollsSideways(page)).toBe(false);
  await shot(page, 'console-runs');
  // filters: by status, by text; the URL keeps them
  await page.getByLabel('status filter').selectOption('failed');
  await until('the failed run alone', async () => (await rows.count()) === 1 && (await rows.first().getAttribute('data-run')) === runs.failed);
  expect(page.url()).toContain('status=failed');
  await page.getByLabel('status filter').selectOption('');
  await page.getByLabel('search runs').fill('notes.txt');
  await page.getByRole('button', { name: 'Search' }).click();
  await until('the tree alone', async () => (await rows.count()) === 1 && (await rows.first().getAttribute('data-run')) === runs.tree);
  await page.getByRole('button', { name: 'Clear' }).click();
  await until('every run again', async () => (await rows.count()) === 3);
  // a click opens the run
  await page.locator(`tr.run[data-run="${runs.stopped}"] td.task`).click();
  await until('the run to open', async () => (await page.getByTestId('actor-id').count()) === 1);
  expect(page.url()).toBe(`${serve.url}?actor=${runs.stopped}`);
  expect(await page.getByTestId('actor-id').textContent()).toBe(runs.stopped);
  // Back returns to the list
  await page.goBack();
  await until('the list again', async () => (await rows.count()) === 3);
  expect(errors).toEqual([]);
  await page.close();
}, 120_000);

test('a stopped agent says step_budget, a failed one context_cannot_fit, each with its ID as text; nothing scrolls sideways at 1280', async () => {
  const page = await stack.browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${serve.pageUrl}&actor=${runs.stopped}`);
  const reason = page.getByTestId('summary-reason');
  await reason.waitFor({ timeout: 30_000 });
  expect(await reason.textContent()).toContain('stopped: step_budget');
  expect(await reason.textContent()).toContain('--max-steps');
  expect(await page.getByTestId('actor-id').textContent()).toBe(runs.stopped);
  expect(await page.getByTestId('summary-task').textContent()).toContain('read a.txt twice');
  await until('the usage to read in tokens', async () => /\d+ tok/.test((await page.getByTestId('summary-usage').textContent()) ?? ''));
  expect(await page.getByTestId('summary-usage').textContent()).toContain('cost unknown');
  // the events say what each one did, as `actorloop events` does
  expect(await page.locator('li.event[data-type="tool/call"]').first().textContent()).toContain('read_file a.txt');
  expect(await scrollsSideways(page)).toBe(false);
  await page.goto(`${serve.url}?actor=${runs.failed}`);
  await until('the failed agent\'s reason', async () => ((await reason.textContent().catch(() => '')) ?? '').includes('failed'));
  // the provider refused the request, and nothing closed was left to compact
  expect(await reason.textContent()).toContain('context_cannot_fit');
  expect(await reason.textContent()).toContain("context window");
  // the timeline marks the failure, with its axis and legend
  await until('a failure mark on the timeline', async () => (await page.locator('.timeline g.mark[data-mark="failed"]').count()) > 0);
  expect(await page.getByTestId('timeline-axis').count()).toBe(1);
  expect(await page.getByTestId('timeline-legend').textContent()).toContain('failed');
  expect(await scrollsSideways(page)).toBe(false);
  await shot(page, 'console-failed');
  expect(errors).toEqual([]);
  await page.close();
}, 120_000);

test('the URL follows the selected child and the time-travel position: a fresh page opened at it shows the same', async () => {
  const page = await stack.browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(`${serve.pageUrl}&actor=${runs.tree}`);
  const writer = page.locator('li.actor[data-name="writer"]');
  await writer.waitFor({ timeout: 30_000 });
  const writerId = (await writer.getAttribute('data-actor'))!;
  await writer.click();
  await until('the URL to name the child', () => page.url() === `${serve.url}?actor=${writerId}`);
  expect(await page.getByTestId('actor-id').textContent()).toBe(writerId);
  expect(await scrollsSideways(page)).toBe(false);
  // a fresh browser (its own context: no cookie yet) opened at the shared URL, the token added as its owner would
  const shared = (): string => `${serve.pageUrl}&${new URL(page.url()).search.slice(1)}`;
  const fresh = await stack.browser.newPage({ viewport: { width: 1280, height: 800 } });
  await fresh.goto(shared());
  await until('the fresh page to show the child', async () => (await fresh.getByTestId('actor-id').textContent().catch(() => null)) === writerId);
  expect(await fresh.locator('li.actor.selected').getAttribute('data-actor')).toBe(writerId);
  // back in time: the URL holds the position, and a fresh page opens there
  const slider = page.getByLabel('time travel');
  await until('the stream to load', async () => Number(await slider.getAttribute('max')) > 5);
  // a position where the writer exists (its spawn is early in the tree's stream), and one before it
  const at = Number(await slider.getAttribute('max')) - 2;
  await slider.fill(String(at));
  await until('the URL to hold the position', () => page.url().endsWith(`&at=${at}`));
  expect(await page.getByTestId('position').textContent()).toContain(`at ${at}/`);
  await fresh.goto(shared());
  await until('the fresh page at the same position', async () => ((await fresh.getByTestId('position').textContent()) ?? '').startsWith(`at ${at}/`));
  await until('the fresh page to show the child there', async () => (await fresh.getByTestId('actor-id').count()) === 1);
  expect(await fresh.getByTestId('actor-id').textContent()).toBe(writerId);
  await slider.fill('1');
  await until('the page to say the child did not exist yet', async () => (await page.getByTestId('not-yet').count()) === 1);
  // the runs list opens as a panel over any run, the run shown marked; a click opens another run
  await page.getByRole('button', { name: 'Live', exact: true }).click();
  await page.getByRole('button', { name: 'Runs', exact: true }).click();
  const panel = page.getByTestId('runs-panel');
  await until('the panel to list the runs', async () => (await panel.locator('tr.run').count()) === 3);
  expect(await panel.locator('tr.run.current').getAttribute('data-run')).toBe(runs.tree);
  await panel.locator(`tr.run[data-run="${runs.failed}"] td.task`).click();
  await until('the failed run to open', () => page.url() === `${serve.url}?actor=${runs.failed}`);
  await until('its summary', async () => (await page.getByTestId('actor-id').textContent().catch(() => '')) === runs.failed);
  expect(await panel.count()).toBe(0);
  await fresh.close();
  await page.close();
}, 120_000);

test('the waiting tree at 1600×1000: Approve for the child is on the first screen, and clicking it runs the write and completes the tree', async () => {
  const page = await stack.browser.newPage({ viewport: { width: 1600, height: 1000 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${serve.pageUrl}&actor=${runs.tree}`);
  const approve = page.locator('.needs-you li.approval button.approve');
  await approve.waitFor({ timeout: 30_000 });
  // on the root's page, without scrolling: the whole button inside the viewport
  const box = (await approve.boundingBox())!;
  expect(box.y).toBeGreaterThanOrEqual(0);
  expect(box.y + box.height).toBeLessThanOrEqual(1000);
  expect(box.x + box.width).toBeLessThanOrEqual(1600);
  expect(await page.evaluate('window.scrollY')).toBe(0);
  expect(await page.locator('.needs-you li.approval').textContent()).toContain('writer');
  expect(await page.getByTestId('actor-id').textContent()).toBe(runs.tree);
  expect(await page.title()).toMatch(/^\(1\) actorloop/);
  await shot(page, 'console-waiting');
  await approve.click();
  await until('the page to say what the answer did', async () => /approved apr_\S+ \(msg_\S+\): the write_file call runs/.test((await page.getByTestId('needs-you-said').textContent().catch(() => '')) ?? ''));
  await until('the file to be written', async () => (await readFile(join(ws, 'notes.txt'), 'utf8').catch(() => '')) === 'hello\n');
  await until('the tree to complete', async () => {
    const s = await statuses();
    return s.get(runs.tree) === 'completed' && [...s.values()].filter((v) => v === 'completed').length === 2;
  }, 60_000);
  await until('the page to say completed', async () => (await page.locator(`li.actor[data-actor="${runs.tree}"]`).getAttribute('data-status')) === 'completed');
  await until('nothing to need a person', async () => (await page.locator('.needs-you li.pending').count()) === 0);
  expect(await page.title()).toBe('actorloop');
  expect(errors).toEqual([]);
  await page.close();
  serve.proc.kill('SIGTERM');
  host.proc.kill('SIGTERM');
}, 120_000);
