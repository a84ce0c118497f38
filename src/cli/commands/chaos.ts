import { rm, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openBus } from '../../bus/connection.js';
import type { NatsCredentials } from '../../bus/nats-auth.js';
import { environmentOf, type EffectiveConfig } from '../../config/config.js';
import { loadScriptFile, type Script } from '../../model/script.js';
import { ConfigError } from '../../protocol/errors.js';
import { createLogReader } from '../../store/jetstream-log.js';
import { scriptPaths } from '../chaos/modes.js';
import { modeFor, occurrences, parsePoints, planRuns, type ChaosMode, type ChaosPoint } from '../chaos/plan.js';
import {
  pointReports,
  printReport,
  progressLine,
  runReport,
  type BaselineReport,
  type ChaosSummary,
  type RunReport,
} from '../chaos/report.js';
import { runScenario, type ChaosContext, type ScenarioResult } from '../chaos/run.js';
import { EXIT } from '../exit-codes.js';
import type { Out } from '../output.js';
import { busOptions, createLogger } from '../runtime.js';
import { exitCodeForSignal, onStop, stopReceived } from '../stop-signals.js';

/** Options of `actorloop chaos`, as commander hands them over (strings: checked here). */
export interface ChaosOptions {
  /** `all` (the default) or a comma-separated list of points. */
  points?: string;
  /** Runs per point (default 1). */
  runs?: string | number;
  /** Seeds the choice of which occurrence of a point to kill at; absent: always the first. */
  seed?: string | number;
  /** 1 (default): each run's `run`/`resume` processes host the agent; K > 1: K `actorloop host` processes do. */
  hosts?: string | number;
  json?: boolean;
}

/** A child still running after this long is stuck: a scripted run takes about a second. */
const CHILD_TIMEOUT_MS = 30_000;
const MAX_RUNS = 1_000;
/** More hosts than this on one machine tell nothing more, and each costs a process. */
const MAX_HOSTS = 16;

function wholeNumber(flag: string, value: string | number | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  const text = String(value).trim();
  const n = Number(text);
  if (text === '' || !Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError('config.chaos_flag', `${flag} takes a whole number from ${min} to ${max}, got "${value}"`);
  }
  return n;
}

/** The session's settings, every flag checked before anything starts. */
interface ChaosSettings {
  script: string;
  /** The script, parsed: the modes that change it run a variant of it (`scriptFor`). */
  parsed: Script;
  template: string | null;
  points: ChaosPoint[];
  runs: number;
  seed: number | null;
  hosts: number;
  json: boolean;
}

async function settingsOf(scriptPath: string, opts: ChaosOptions): Promise<ChaosSettings> {
  const hosts = wholeNumber('--hosts', opts.hosts, 1, 1, MAX_HOSTS);
  const runs = wholeNumber('--runs', opts.runs, 1, 1, MAX_RUNS);
  const seed = opts.seed === undefined ? null : wholeNumber('--seed', opts.seed, 0, 0, 0xffffffff);
  const script = resolve(scriptPath);
  const parsed = await loadScriptFile(script);
  // a script with agents besides `main` is a tree: its spawn and notice points are swept too
  const points = parsePoints(opts.points, 'agents' in parsed && Object.keys(parsed.agents).some((n) => n !== 'main'));
  // a `workspace/` next to the script is the scenario's starting workspace, copied for each run
  const template = join(dirname(script), 'workspace');
  const hasTemplate = (await stat(template).catch(() => null))?.isDirectory() === true;
  return { script, parsed, template: hasTemplate ? template : null, points, runs, seed, hosts, json: opts.json === true };
}

/** The CLI's entry script, next to this package's `dist/`: children run the same build as we do. */
function cliEntry(): string {
  return fileURLToPath(new URL('../../../bin/actorloop.js', import.meta.url));
}

/** The environment the config was loaded from, minus `ACTORLOOP_FAULTS`: each child gets only the fault its run plans. */
function childEnv(config: EffectiveConfig, hostLogin: NatsCredentials): NodeJS.ProcessEnv {
  const { ACTORLOOP_FAULTS: _faults, ...env } = environmentOf(config);
  // Hosts of a chaos run keep data dirs of their own, so they cannot find the server's logins in
  // one: they get the host login the usual way. Commands on the session's data dir use its logins.
  if (hostLogin.kind === 'user') return { ...env, NATS_USER: hostLogin.user, NATS_PASSWORD: hostLogin.pass };
  return env;
}

/**
 * `actorloop chaos <script.json>`: runs the scenario once clean per run mode it needs (the
 * baseline: how often each point is reached, which effect lines a clean run writes; a mode that
 * changes the script runs a variant written next to the session's data, see `chaos-modes.ts`),
 * then for every point and run kills a `run` child at that point, resumes (and approves, steers,
 * interrupts or answers, as its mode says) until the turn ends, and checks the log's invariants and the effect file against the log. With `--hosts K`
 * (K > 1) each run starts K `actorloop host` processes, `run` hands the agent to them, and the
 * host running it is the one killed (see `driveWithHosts`). One nats-server serves the whole
 * session and is stopped at its end, as is every child. Exit 1 on any violation.
 */
export async function chaosCommand(scriptPath: string, opts: ChaosOptions, config: EffectiveConfig, out: Out): Promise<number> {
  const s = await settingsOf(scriptPath, opts);
  const started = Date.now();
  const logger = createLogger(config);
  const bus = await openBus(busOptions(config, logger, 'actorloop-chaos', 'client'));
  const abort = new AbortController();
  const interrupted = (): boolean => abort.signal.aborted;
  const onSigint = (): void => {
    out.stderr.write('\nchaos: interrupted; killing the running child\n');
    abort.abort();
  };
  process.on('SIGINT', onSigint);
  // SIGTERM / SIGHUP: the same stop (children killed, the server stopped), exit 128 + the signal
  const offStop = onStop((signal) => {
    out.stderr.write(`\nchaos: ${signal}; killing the running child\n`);
    abort.abort();
  });
  try {
    const ctx: ChaosContext = {
      cliEntry: cliEntry(),
      common: ['--data-dir', config.dataDir, '--nats', bus.url],
      natsUrl: bus.url,
      dataDir: config.dataDir,
      hosts: s.hosts,
      env: childEnv(config, bus.loginFor('host')),
      reader: createLogReader({ js: bus.js, jsm: bus.jsm, logger }),
      directory: bus.directory,
      signal: abort.signal,
      childTimeoutMs: CHILD_TIMEOUT_MS,
    };
    const modes = new Set(s.points.map(modeFor));
    const scripts = await scriptPaths(modes, s.script, s.parsed, config.dataDir);
    const one = async (task: string, mode: ChaosMode, plan: Parameters<typeof runReport>[0], expected: string[]) => {
      const result = await runScenario(ctx, { scriptPath: scripts.get(mode)!, template: s.template, task, mode, faults: plan.faults, expectedLines: expected });
      const report = runReport(plan, result);
      // a failed run's workspace is the evidence; any other holds nothing to look at
      if (report.workspace === null) await rm(result.workspace, { recursive: true, force: true });
      return { result, report };
    };

    const baselines = new Map<ChaosMode, { result: ScenarioResult; report: BaselineReport }>();
    for (const mode of modes) {
      if (interrupted()) break;
      const { result, report } = await one(`chaos baseline (${mode}): no fault`, mode, { run: 1, faults: [] }, []);
      baselines.set(mode, { result, report: { ...report, mode, effectLines: result.effectLines.length } });
      out.stderr.write(progressLine(`baseline ${mode}`, report));
    }
    const baselineReports = [...baselines.values()].map((b) => b.report);
    const runs: Array<{ point: ChaosPoint; report: RunReport }> = [];
    // without a clean baseline a kill's violations could not be told from the scenario's own
    if (baselineReports.every((b) => b.passed) && !interrupted()) {
      // in-process, counted over the whole tree (one process counts a point over every agent it
      // hosts); over hosts, a kill is scoped to the root agent, so its log alone counts
      const counted = (r: ScenarioResult) => (s.hosts > 1 ? r.events : r.treeEvents);
      const plans = planRuns(s.points, s.runs, s.seed, (point, mode) => occurrences(point, counted(baselines.get(mode)!.result)));
      for (const plan of plans) {
        if (interrupted()) break;
        const expected = baselines.get(plan.mode)!.result.effectLines;
        const { report } = await one(`chaos ${plan.point} run ${plan.run}`, plan.mode, plan, expected);
        if (report.interrupted) break;
        runs.push({ point: plan.point, report });
        out.stderr.write(progressLine(`${plan.point} run ${plan.run}/${s.runs} (${report.faults})`, report));
      }
    }
    const points = pointReports(runs);
    const all = [...baselineReports, ...runs.map((r) => r.report)];
    const violations = all.reduce((n, r) => n + r.violations.length, 0);
    const summary: ChaosSummary = {
      type: 'summary',
      ok: violations === 0 && !interrupted(),
      script: s.script,
      seed: s.seed,
      hosts: s.hosts,
      points: points.length,
      runs: runs.length,
      passed: runs.filter((r) => r.report.passed).length,
      violations,
      elapsedMs: Date.now() - started,
      interrupted: interrupted(),
      baselines: baselineReports,
    };
    printReport(out, s.json, points, summary);
    const signal = stopReceived();
    if (signal !== null) return exitCodeForSignal(signal);
    if (interrupted()) return EXIT.interrupted;
    return violations === 0 ? EXIT.completed : EXIT.failed;
  } finally {
    process.off('SIGINT', onSigint);
    offStop();
    // stops the embedded nats-server when this command started it: nothing is left running
    await bus.close();
  }
}
