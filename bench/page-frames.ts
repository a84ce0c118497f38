/**
 * The page under load (`--page-actors 1000 --page-rate 200`): the gateway started in-process on
 * the bench's runtime with the built page (dist/web), a tree of N actors written to the real
 * stores (`page-tree.ts`), the page opened on its root in headless Chromium (playwright-core,
 * the browser the page tests find), then events committed at R a second across the tree for S seconds while
 * the page measures its frames: requestAnimationFrame deltas (the longest is the longest frame),
 * PerformanceObserver `longtask` and `long-animation-frame` entries, and the page's own
 * `actorloop:render` measures (web/src/app.tsx: a render of the app to its DOM commit), the
 * page's main-thread time in scripts and in style and layout (CDP Performance metrics), and, as
 * the floor, the frames of a blank page measured over the same window in the same browser. The
 * target is a longest frame under 50 ms. Prints a table; never asserts. `BENCH_PAGE_PROFILE=<file>`
 * records a CPU profile of the page over the first run (CDP Profiler) and prints its heaviest
 * functions.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, CDPSession, Page } from 'playwright-core';
import { launchChromium } from '../test/helpers/browser.js';
import { machineDefinitions } from '../src/client/machine-definitions.js';
import { ConfigError } from '../src/protocol/errors.js';
import { startGateway, type Gateway, type GatewayCommands } from '../src/server/gateway.js';
import { createLogReader } from '../src/store/jetstream-log.js';
import { createRedactor } from '../src/tools/redact.js';
import type { BenchRuntime, Cleanup } from './harness.js';
import { fmtMs, median, nowMs, percentile, table } from './stats.js';
import { writePageTree } from './page-tree.js';

/** The bench gateway's token, checked on every request as `serve` checks it. */
const PAGE_TOKEN = randomBytes(32).toString('base64url');

const PAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'web');
const TARGET_MS = 50;

/** The bench sends no command through the gateway: every one is refused. */
const NO_COMMANDS: GatewayCommands = new Proxy({} as GatewayCommands, {
  get: () => async () => {
    throw new ConfigError('bench.no_commands', 'the bench gateway takes no commands');
  },
});

/**
 * What the page records, installed before its own script runs: every frame's delta from the one
 * before, and the long tasks and long animation frames Chromium reports, while `measuring`.
 */
const MEASURE_SCRIPT = `(() => {
  const b = (window.__bench = { measuring: false, frames: [], longtasks: [], loafs: [], worst: [], loafSupported: false, t0: 0 });
  let last = 0;
  const tick = (t) => {
    if (last && b.measuring) b.frames.push(t - last);
    last = t;
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
  new PerformanceObserver((list) => {
    if (b.measuring) for (const e of list.getEntries()) b.longtasks.push(e.duration);
  }).observe({ type: 'longtask' });
  if ((PerformanceObserver.supportedEntryTypes || []).includes('long-animation-frame')) {
    b.loafSupported = true;
    new PerformanceObserver((list) => {
      if (!b.measuring) return;
      for (const e of list.getEntries()) {
        b.loafs.push(e.duration);
        // what the worst frames spent their time on: scripts (by what invoked them), then style and layout, then paint
        if (e.duration >= 50) b.worst.push({
          duration: e.duration, blocking: e.blockingDuration, scriptsEnd: e.renderStart ? e.renderStart - e.startTime : null,
          styleAndLayout: e.styleAndLayoutStart ? e.startTime + e.duration - e.styleAndLayoutStart : null,
          scripts: e.scripts.map((x) => ({ invoker: x.invoker, duration: Math.round(x.duration), fn: x.sourceFunctionName, forcedLayout: Math.round(x.forcedStyleAndLayoutDuration) })),
        });
      }
    }).observe({ type: 'long-animation-frame' });
  }
})();`;

/** What the page recorded over one run. */
interface PageRecord {
  frames: number[];
  longtasks: number[];
  loafs: number[] | null;
  renders: number[];
  /** The long animation frames of 50 ms or more, with what they spent it on. */
  worst: unknown[];
}

/** One run's figures. */
interface PageRun {
  committed: number;
  ratePerSec: number;
  delivered: number;
  frames: number[];
  longestFrameMs: number;
  p99FrameMs: number;
  longestTaskMs: number;
  longestLoafMs: number | null;
  renderP50Ms: number;
  longestRenderMs: number;
  /** Main-thread ms a second busy (any task), in scripts, and in style and layout (CDP Performance metrics). */
  busyMsPerSec: number;
  scriptMsPerSec: number;
  styleLayoutMsPerSec: number;
  /** The blank page's longest and p99 frame over the same window: what this machine gives a page that does nothing. */
  floorLongestMs: number;
  floorP99Ms: number;
  /** `GET /v1/actors?root=` of the tree with its fold kept, and folded from the start (ms). */
  keptReadMs: number;
  freshReadMs: number;
  /** Events in the tree's logs at the end. */
  treeEvents: number;
}

/** Options of the page section. */
export interface PageBenchOptions {
  actors: number;
  rate: number;
  seconds: number;
  runs: number;
}

function startPageGateway(rt: BenchRuntime): Promise<Gateway> {
  const redactor = createRedactor();
  return startGateway({
    host: '127.0.0.1', port: 0, token: PAGE_TOKEN, corsOrigins: [], allowFaults: false,
    reader: createLogReader({ js: rt.bus.js, jsm: rt.bus.jsm }), directory: rt.bus.directory,
    redact: (text) => redactor.redact(text).text, machines: machineDefinitions().machines, commands: NO_COMMANDS, logger: rt.logger,
    pageDir: PAGE_DIR,
  });
}

/** Polls `fn` until true; throws naming `what` after `ms`. */
async function until(what: string, fn: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error(`page bench: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** How many events the page holds: the time-travel slider's end is its stream's length. */
const eventsInPage = (page: Page): Promise<number> => page.$eval('input[aria-label="time travel"]', (el) => Number((el as unknown as { max: string }).max));

async function runOnce(rt: BenchRuntime, browser: Browser, o: PageBenchOptions, profile: string | null): Promise<PageRun> {
  const tree = await writePageTree(rt.bus, o.actors);
  const gateway = await startPageGateway(rt);
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  // the floor: a blank page measured over the same window in the same browser, on the same loaded machine
  const blank = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  let cdp: CDPSession | null = null;
  try {
    await page.addInitScript(MEASURE_SCRIPT);
    await blank.setContent('<!doctype html><title>blank</title><p>a page that does nothing</p>');
    await blank.evaluate(MEASURE_SCRIPT);
    // opened as a person opens the URL serve prints: the token once, then the cookie
    await page.goto(`${gateway.url}/?actor=${tree.rootId}&token=${PAGE_TOKEN}`);
    // the page replays the tree's logs and lists its actors: live once it holds them all
    await until('the page to hold the tree', async () => (await eventsInPage(page)) >= tree.initialEvents &&
      (await page.$eval('[data-testid="tree-total"]', (el) => el.textContent ?? '')).includes(`${o.actors} actors`), 120_000);
    await new Promise((r) => setTimeout(r, 2000));
    const before = await eventsInPage(page);
    cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    const m0 = await mainThreadTimes(cdp);
    if (profile) {
      await cdp.send('Profiler.enable');
      await cdp.send('Profiler.start');
    }
    const startMeasuring = (): void => {
      const b = (globalThis as unknown as { __bench: { measuring: boolean; t0: number } }).__bench;
      b.t0 = performance.now();
      b.measuring = true;
    };
    await Promise.all([page.evaluate(startMeasuring), blank.evaluate(startMeasuring)]);
    const trace = profile !== null && process.env.BENCH_PAGE_TRACE === '1';
    if (trace) await browser.startTracing(page, { categories: ['devtools.timeline', 'disabled-by-default-devtools.timeline', 'blink', 'cc', 'toplevel', 'v8', 'loading'] });
    const pumped = await tree.pump(o.rate, new Promise((r) => setTimeout(r, o.seconds * 1000)));
    if (trace) printTrace(await browser.stopTracing());
    // the last events are on their way: measured until the page holds them (bounded)
    const want = before + pumped.events;
    await until('the page to catch up', async () => (await eventsInPage(page)) >= want, 30_000).catch(() => {});
    const rec = await page.evaluate((): PageRecord => {
      const b = (globalThis as unknown as { __bench: { measuring: boolean; t0: number; frames: number[]; longtasks: number[]; loafs: number[]; loafSupported: boolean; worst: unknown[] } }).__bench;
      b.measuring = false;
      const renders = performance.getEntriesByName('actorloop:render').filter((e) => e.startTime >= b.t0).map((e) => e.duration);
      return { frames: b.frames, longtasks: b.longtasks, loafs: b.loafSupported ? b.loafs : null, renders, worst: b.worst };
    });
    const m1 = await mainThreadTimes(cdp);
    const floor = await blank.evaluate((): number[] => {
      const b = (globalThis as unknown as { __bench: { measuring: boolean; frames: number[] } }).__bench;
      b.measuring = false;
      return b.frames;
    });
    if (profile) {
      const { profile: p } = await cdp.send('Profiler.stop');
      await writeFile(profile, JSON.stringify(p));
      printProfile(p, profile);
      console.log(`  long animation frames ≥ 50 ms (${rec.worst.length}):`);
      for (const w of rec.worst) console.log(`    ${JSON.stringify(w)}`);
    }
    const delivered = (await eventsInPage(page)) - before;
    const reads = await timeReads(rt, gateway, tree.rootId);
    const max = (xs: number[]): number => (xs.length === 0 ? 0 : Math.max(...xs));
    return {
      committed: pumped.events, ratePerSec: pumped.events / pumped.seconds, delivered, frames: rec.frames,
      longestFrameMs: max(rec.frames), p99FrameMs: percentile(rec.frames, 99), longestTaskMs: max(rec.longtasks),
      longestLoafMs: rec.loafs === null ? null : max(rec.loafs), renderP50Ms: percentile(rec.renders, 50), longestRenderMs: max(rec.renders),
      busyMsPerSec: (m1.task - m0.task) / (m1.at - m0.at), scriptMsPerSec: (m1.script - m0.script) / (m1.at - m0.at), styleLayoutMsPerSec: (m1.styleLayout - m0.styleLayout) / (m1.at - m0.at),
      floorLongestMs: max(floor), floorP99Ms: percentile(floor, 99), ...reads, treeEvents: tree.initialEvents + pumped.events,
    };
  } finally {
    await cdp?.detach().catch(() => {});
    await blank.close();
    await page.close();
    await gateway.close();
  }
}

/**
 * `GET /v1/actors?root=` on the tree, timed: on the page's gateway (its fold kept, moved on by the
 * commits since its last read: what every read costs now), and the first read of a gateway that
 * never read the tree (a fold from its first commit: what every read cost before the folds were kept).
 */
async function timeReads(rt: BenchRuntime, gateway: Gateway, rootId: string): Promise<{ keptReadMs: number; freshReadMs: number }> {
  const read = async (url: string): Promise<number> => {
    const t = nowMs();
    const res = await fetch(`${url}/v1/actors?root=${rootId}`);
    await res.json();
    return nowMs() - t;
  };
  const kept: number[] = [];
  for (let i = 0; i < 5; i++) kept.push(await read(gateway.url));
  const fresh = await startPageGateway(rt);
  try {
    return { keptReadMs: median(kept), freshReadMs: await read(fresh.url) };
  } finally {
    await fresh.close();
  }
}

/** The page's main-thread time so far in scripts and in style and layout (ms), and when (s), as Chromium counts them. */
async function mainThreadTimes(cdp: CDPSession): Promise<{ script: number; styleLayout: number; task: number; at: number }> {
  const { metrics } = await cdp.send('Performance.getMetrics');
  const m = (name: string): number => metrics.find((x) => x.name === name)?.value ?? 0;
  return { script: m('ScriptDuration') * 1000, styleLayout: (m('LayoutDuration') + m('RecalcStyleDuration')) * 1000, task: m('TaskDuration') * 1000, at: m('Timestamp') };
}

/** The main thread's time by trace event name (complete events, outermost only), printed. */
function printTrace(buf: Buffer): void {
  const { traceEvents } = JSON.parse(buf.toString()) as { traceEvents: Array<{ name: string; ph: string; dur?: number; ts: number; tid: number; pid: number; args?: { name?: string } }> };
  // the page's renderer, not the blank page's: the main thread that ran the most script
  const scripted = new Map<string, number>();
  for (const e of traceEvents) if (e.name === 'FunctionCall' && e.dur) scripted.set(`${e.pid}:${e.tid}`, (scripted.get(`${e.pid}:${e.tid}`) ?? 0) + e.dur);
  const busiest = [...scripted].sort((a, b) => b[1] - a[1])[0]?.[0];
  const main = busiest === undefined ? undefined : { pid: Number(busiest.split(':')[0]), tid: Number(busiest.split(':')[1]) };
  const on = traceEvents.filter((e) => main && e.pid === main.pid && e.tid === main.tid && e.ph === 'X' && e.dur !== undefined).sort((a, b) => a.ts - b.ts);
  const byName = new Map<string, number>();
  // each event's own time: its span less its children's
  const stack: Array<{ end: number; name: string; child: number; dur: number }> = [];
  const close = (upTo: number): void => {
    while (stack.length > 0 && stack[stack.length - 1]!.end <= upTo) {
      const top = stack.pop()!;
      byName.set(top.name, (byName.get(top.name) ?? 0) + (top.dur - top.child) / 1000);
      if (stack.length > 0) stack[stack.length - 1]!.child += top.dur;
    }
  };
  for (const e of on) {
    close(e.ts);
    stack.push({ end: e.ts + e.dur!, name: e.name, child: 0, dur: e.dur! });
  }
  close(Infinity);
  const top = [...byName].sort((a, b) => b[1] - a[1]).slice(0, 20);
  console.log('  the page\'s main thread by trace event (self ms over the pump):');
  console.log(table(['event', 'self ms'], top.map(([k, ms]) => [k, ms.toFixed(0)])));
}

/** The functions of a CPU profile with the most self time, printed. */
function printProfile(p: { nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number } }>; samples?: number[]; timeDeltas?: number[] }, file: string): void {
  const self = new Map<number, number>();
  const samples = p.samples ?? [];
  const deltas = p.timeDeltas ?? [];
  samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (deltas[i] ?? 0)));
  const byFn = new Map<string, number>();
  for (const n of p.nodes) {
    const f = n.callFrame;
    const key = `${f.functionName || '(anonymous)'} ${f.url.split('/').pop() ?? ''}:${f.lineNumber + 1}:${f.columnNumber + 1}`;
    byFn.set(key, (byFn.get(key) ?? 0) + (self.get(n.id) ?? 0) / 1000);
  }
  const top = [...byFn].sort((a, b) => b[1] - a[1]).slice(0, 15);
  console.log(`  CPU profile of the page written to ${file}; heaviest functions by self time:`);
  console.log(table(['function', 'self ms'], top.map(([k, ms]) => [k, ms.toFixed(0)])));
}

/** Runs and prints the page section. */
export async function runPageSection(rt: BenchRuntime, cleanup: Cleanup, o: PageBenchOptions): Promise<void> {
  if (!existsSync(join(PAGE_DIR, 'index.html'))) {
    console.log('');
    console.log(`== the page under load: skipped (no built page at ${PAGE_DIR}: run \`npm run build\` first) ==`);
    return;
  }
  const browser = await launchChromium();
  cleanup.add('close chromium', () => browser.close());
  const runs: PageRun[] = [];
  try {
    for (let r = 0; r < o.runs; r++) runs.push(await runOnce(rt, browser, o, r === 0 ? (process.env.BENCH_PAGE_PROFILE ?? null) : null));
  } finally {
    await browser.close();
  }
  const row = (label: string, x: PageRun): string[] => [
    label, String(o.actors), x.ratePerSec.toFixed(0), `${x.delivered}/${x.committed}`, fmtMs(x.longestFrameMs), fmtMs(x.p99FrameMs),
    fmtMs(x.longestTaskMs), x.longestLoafMs === null ? 'n/a' : fmtMs(x.longestLoafMs), `${fmtMs(x.renderP50Ms)} / ${fmtMs(x.longestRenderMs)}`,
    `${x.busyMsPerSec.toFixed(0)} / ${x.scriptMsPerSec.toFixed(0)} / ${x.styleLayoutMsPerSec.toFixed(0)}`, `${fmtMs(x.floorLongestMs)} / ${fmtMs(x.floorP99Ms)}`, `< ${TARGET_MS} ms: ${x.longestFrameMs < TARGET_MS ? 'met' : 'missed'}`,
  ];
  const med = (f: (x: PageRun) => number): number => median(runs.map(f));
  const loafs = runs.map((x) => x.longestLoafMs).filter((x): x is number => x !== null);
  const m: PageRun = {
    committed: med((x) => x.committed), ratePerSec: med((x) => x.ratePerSec), delivered: med((x) => x.delivered), frames: [],
    longestFrameMs: med((x) => x.longestFrameMs), p99FrameMs: med((x) => x.p99FrameMs), longestTaskMs: med((x) => x.longestTaskMs),
    longestLoafMs: loafs.length > 0 ? median(loafs) : null, renderP50Ms: med((x) => x.renderP50Ms), longestRenderMs: med((x) => x.longestRenderMs),
    busyMsPerSec: med((x) => x.busyMsPerSec), scriptMsPerSec: med((x) => x.scriptMsPerSec), styleLayoutMsPerSec: med((x) => x.styleLayoutMsPerSec),
    floorLongestMs: med((x) => x.floorLongestMs), floorP99Ms: med((x) => x.floorP99Ms),
    keptReadMs: med((x) => x.keptReadMs), freshReadMs: med((x) => x.freshReadMs), treeEvents: med((x) => x.treeEvents),
  };
  console.log('');
  console.log(`== the page under load: ${o.actors} actors in the tree, ${o.rate} events/s for ${o.seconds} s (headless Chromium) ==`);
  console.log(table(
    ['run', 'actors', 'events/s', 'events delivered', 'longest frame ms', 'p99 frame ms', 'longest task ms', 'longest LoAF ms', 'render p50 / max ms', 'busy / script / style+layout ms/s', 'blank page longest / p99 ms', 'target'],
    [...runs.map((x, i) => row(String(i + 1), x)), row('median', m)],
  ));
  console.log(
    '  frame = requestAnimationFrame delta in the page; task = PerformanceObserver longtask (≥ 50 ms, else 0); LoAF = long-animation-frame;\n' +
      '  render = the page\'s actorloop:render measure (a render of the app to its DOM commit); busy, script and style+layout =\n' +
      '  the page\'s main-thread time a second in any task, in scripts, in style and layout (CDP Performance.getMetrics); blank page = a page doing nothing, measured\n' +
      '  over the same window in the same browser: the floor this machine gives any page. The gateway, the writer and the\n' +
      '  page share this machine\'s CPUs with the rest of the bench.',
  );
  console.log(`  GET /v1/actors?root= of the tree after each run (${o.actors} actors, ${m.treeEvents} events), median of the runs: ` +
    `${fmtMs(m.keptReadMs)} ms with the gateway's fold kept and moved on, ${fmtMs(m.freshReadMs)} ms folded from the first commit (every read before).`);
}
