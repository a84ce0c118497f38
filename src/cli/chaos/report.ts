import type { Violation } from '../../verify/verify.js';
import type { Out } from '../output.js';
import { terminalText } from '../../client/terminal-text.js';
import { describeFaults, type ChaosMode, type ChaosPoint, type RunPlan } from './plan.js';
import type { ScenarioResult } from './run.js';

/** One run in a report: what was killed, how it went, what broke. */
export interface RunReport {
  run: number;
  /** The kills planned, `<point>@<n>,...` (empty for a baseline). */
  faults: string;
  agentId: string | null;
  passed: boolean;
  kills: number;
  /** Starts refused right after a kill (the dead process's lease not yet lapsed), tried again. */
  refusals: number;
  /** The processes of the run in the order they ended, `run`, `resume`, `approve`, `host <name>`, each with how it ended. */
  processes: string[];
  recoveredInMs: number | null;
  elapsedMs: number;
  /** Ctrl-C stopped it: it was not checked and counts as neither passed nor failed. */
  interrupted: boolean;
  /** Kept only when the run did not pass, for a person to look at. */
  workspace: string | null;
  violations: Violation[];
}

/** One point's line of the report (one `--json` object). */
export interface PointReport {
  type: 'point';
  point: ChaosPoint;
  runs: number;
  passed: number;
  /** Median over the runs that were killed; null when none was. */
  recoveredInMsMedian: number | null;
  violations: number;
  results: RunReport[];
}

/** A clean run of one mode, which the session measures its points against. */
export interface BaselineReport extends RunReport {
  mode: ChaosMode;
  effectLines: number;
}

/** The last line of the report. */
export interface ChaosSummary {
  type: 'summary';
  ok: boolean;
  script: string;
  seed: number | null;
  /** `actorloop host` processes each run was spread over; 1: none (each command hosts the agent). */
  hosts: number;
  points: number;
  runs: number;
  passed: number;
  violations: number;
  elapsedMs: number;
  /** Ctrl-C ended the session early: `ok` is false and the exit code 130. */
  interrupted: boolean;
  baselines: BaselineReport[];
}

/** The report of one finished run. */
export function runReport(plan: Pick<RunPlan, 'run' | 'faults'>, r: ScenarioResult): RunReport {
  const passed = r.violations.length === 0 && !r.interrupted;
  return {
    run: plan.run,
    faults: describeFaults(plan.faults),
    agentId: r.agentId,
    passed,
    kills: r.kills,
    refusals: r.refusals,
    processes: r.processes.map((p) => `${p.command}${p.name ? ` ${p.name}` : ''}${p.fault ? ` --fault ${p.fault}` : ''}: ${p.signal ?? `exit ${p.code}`}`),
    recoveredInMs: r.recoveredInMs,
    elapsedMs: r.elapsedMs,
    interrupted: r.interrupted,
    workspace: passed || r.interrupted ? null : r.workspace,
    violations: r.violations,
  };
}

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : Math.round((s[mid - 1]! + s[mid]!) / 2);
}

/** Groups run reports by point, in the order the points ran. */
export function pointReports(runs: Array<{ point: ChaosPoint; report: RunReport }>): PointReport[] {
  const byPoint = new Map<ChaosPoint, RunReport[]>();
  for (const { point, report } of runs) byPoint.set(point, [...(byPoint.get(point) ?? []), report]);
  return [...byPoint].map(([point, results]) => ({
    type: 'point',
    point,
    runs: results.length,
    passed: results.filter((r) => r.passed).length,
    recoveredInMsMedian: median(results.flatMap((r) => (r.recoveredInMs === null ? [] : [r.recoveredInMs]))),
    violations: results.reduce((n, r) => n + r.violations.length, 0),
    results,
  }));
}

/** One progress line for stderr as each run ends: a session takes a while. */
export function progressLine(label: string, r: RunReport): string {
  const how = r.interrupted ? 'interrupted' : r.passed ? 'passed' : `FAILED (${r.violations.length} violation${r.violations.length === 1 ? '' : 's'})`;
  const recovered = r.recoveredInMs === null ? '' : `, recovered in ${r.recoveredInMs} ms`;
  const refused = r.refusals === 0 ? '' : `, ${r.refusals} refused start${r.refusals === 1 ? '' : 's'}`;
  return `chaos: ${label}: ${how} · ${r.processes.length} process${r.processes.length === 1 ? '' : 'es'}, ${r.kills} kill${r.kills === 1 ? '' : 's'}${refused}${recovered} · ${r.agentId ?? 'no agent'}\n`;
}

function violationLines(label: string, r: RunReport): string[] {
  if (r.violations.length === 0) return [];
  const head = `${label} (${r.faults || 'no fault'}, ${r.agentId ?? 'no agent'}${r.workspace ? `, workspace kept at ${r.workspace}` : ''}):`;
  return [head, ...r.violations.map((v) => `  seq ${v.seq ?? '-'}: ${v.code}: ${v.message}`)];
}

/** Prints the report: NDJSON (one object per point, then the summary) or a table for people. */
export function printReport(out: Out, json: boolean, points: PointReport[], summary: ChaosSummary): void {
  if (json) {
    for (const p of points) out.stdout.write(`${JSON.stringify(p)}\n`);
    out.stdout.write(`${JSON.stringify(summary)}\n`);
    return;
  }
  const lines: string[] = [];
  lines.push(`chaos ${summary.script} · seed ${summary.seed ?? 'none (first occurrences)'}${summary.hosts > 1 ? ` · ${summary.hosts} hosts` : ''}`);
  for (const b of summary.baselines) {
    const how = b.interrupted ? 'interrupted' : b.passed ? 'passed' : 'FAILED';
    lines.push(`baseline ${b.mode}: ${how} · ${b.effectLines} effect line(s) · ${b.elapsedMs} ms · ${b.agentId ?? 'no agent'}`);
  }
  const width = Math.max(24, ...points.map((p) => p.point.length));
  lines.push('', `${'point'.padEnd(width)}  runs  passed  recovered-in  violations`);
  for (const p of points) {
    const rec = p.recoveredInMsMedian === null ? '-' : `${p.recoveredInMsMedian} ms`;
    lines.push(`${p.point.padEnd(width)}  ${String(p.runs).padStart(4)}  ${String(p.passed).padStart(6)}  ${rec.padStart(12)}  ${String(p.violations).padStart(10)}`);
  }
  const details = [
    ...summary.baselines.flatMap((b) => violationLines(`baseline ${b.mode}`, b)),
    ...points.flatMap((p) => p.results.flatMap((r) => violationLines(`${p.point} run ${r.run}`, r))),
  ];
  if (details.length > 0) lines.push('', ...details);
  lines.push(
    '',
    `${summary.passed} of ${summary.runs} run(s) passed, ${summary.violations} violation(s) · ${(summary.elapsedMs / 1000).toFixed(1)} s${summary.interrupted ? ' · interrupted' : ''}`,
  );
  // violations quote the log: shown, not acted on
  out.stdout.write(`${lines.map((l) => terminalText(l)).join('\n')}\n`);
}
