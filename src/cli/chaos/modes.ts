import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Script, ScriptResponse } from '../../model/script.js';
import type { TurnOutcome } from '../../protocol/events.js';
import { COMPACTION_FAULT_POINTS, FAULT_POINTS, JOB_FAULT_POINTS, WORKFLOW_FAULT_POINTS, type TREE_FAULT_POINTS } from '../../actors/faults/faults.js';

/**
 * The points `actorloop chaos --points all` kills at: every fault point of design §7 this
 * runtime has, plus `after:approval/granted`, which only a run that asks can reach, and the
 * compaction points, which a run reaches once a person asked for a checkpoint, and the job points,
 * which a run reaches when its model starts a job, and the workflow point, which a run reaches when
 * its model starts a workflow. Points that
 * need a person's act (an approval, a steer, an interrupt, an answer) run in a mode of their own
 * (`modeFor`), which the driver carries out.
 */
export const CHAOS_POINTS = [...FAULT_POINTS, 'after:approval/granted', ...COMPACTION_FAULT_POINTS, ...JOB_FAULT_POINTS, ...WORKFLOW_FAULT_POINTS] as const;
/** One of `CHAOS_POINTS`, or of the points only a tree reaches (`TREE_FAULT_POINTS`). */
export type ChaosPoint = (typeof CHAOS_POINTS)[number] | (typeof TREE_FAULT_POINTS)[number];

/**
 * The variants of the scenario a chaos session runs. Most points are reached by the scenario as
 * it is (`full-auto`); the others need something a person does, so their runs (and a baseline of
 * their own) do it, and every other point's runs stay as they were:
 * - `ask`: approvals are asked (`--approve ask`) and answered with `actorloop approve`.
 * - `steer`: as `ask`, and at the first approval wait the driver sends a steer
 *   (`actorloop send --steer --no-follow`) before approving; the step after the approval claims
 *   it. Sent while nobody runs the agent, so it lands between the same two steps every time. The
 *   script gets a spare final answer: a kill after the claim puts the steer back to pending, and
 *   when the claiming step was the last, the step that takes it in is one the clean run never made.
 * - `interrupt`: the first model call is slow (an abortable `delay_ms`); once the log shows its
 *   `attempt/start` the driver runs `actorloop interrupt`, and the turn must end `cancelled`.
 * - `question`: the script first calls `ask_user`; the driver answers each question it parks on
 *   with `actorloop answer --option`.
 * - `budget`: as `full-auto`, with a token budget far above what the scenario uses, so every
 *   attempt commits its reservation (`after:budget-reserved`) and is settled.
 * - `goal`: the run has a goal (`run --goal`, the task as its objective), and the script asks to
 *   complete it (`update_goal`) before its final answer, so the turn ends with the goal complete
 *   and no continuation: two `goal/updated` (the request, the completion) to kill after.
 * - `compact`: as `ask`, and at the first approval wait the driver runs `actorloop compact`
 *   before approving; the step after the approval compacts the closed steps but the newest
 *   (`compaction_keep_steps = 1`), its checkpoint committed whatever it saves
 *   (`compaction_min_gain_tokens = 0`).
 * - `job`: as `full-auto`, and the script first starts a background job (`start_job`, a command
 *   appending to `job.log`, not the effect file: a job a kill interrupted before its command ran
 *   is a job that ended `interrupted`, not a lost effect of its call) and waits for it
 *   (`wait_jobs`), so the turn ends only after the job's notice is taken in.
 * - `workflow`: as `full-auto`, and the script first writes a two-node workflow file
 *   (`write_file`), starts it (`start_workflow`: a → b, each appending to `wf.log`) and waits for
 *   the run's notice (`wait_jobs`), so a kill at `after:node/ended` lands between a's result and b.
 */
export type ChaosMode = 'full-auto' | 'ask' | 'steer' | 'interrupt' | 'question' | 'budget' | 'goal' | 'compact' | 'job' | 'workflow';

/** How a mode's runs go: the approval mode they run with, and the end their turn must reach. */
export interface ModeSpec {
  approve: 'full-auto' | 'ask';
  outcome: Extract<TurnOutcome, 'completed' | 'cancelled'>;
  /** Flags the mode's `run` adds. */
  runArgs?: readonly string[];
  /** The run has a goal: the task is its objective. */
  goal?: boolean;
}

/** The token budget a `budget` run has: far above the scenario's use, so no attempt is refused. */
export const CHAOS_MAX_TOKENS = 100_000_000;

/** Every mode's spec: a `Record`, so a new mode does not compile without one. */
export const MODES: Readonly<Record<ChaosMode, ModeSpec>> = {
  'full-auto': { approve: 'full-auto', outcome: 'completed' },
  ask: { approve: 'ask', outcome: 'completed' },
  steer: { approve: 'ask', outcome: 'completed' },
  interrupt: { approve: 'full-auto', outcome: 'cancelled' },
  question: { approve: 'full-auto', outcome: 'completed' },
  budget: { approve: 'full-auto', outcome: 'completed', runArgs: ['--max-tokens', String(CHAOS_MAX_TOKENS)] },
  goal: { approve: 'full-auto', outcome: 'completed', goal: true },
  compact: { approve: 'ask', outcome: 'completed', runArgs: ['-c', 'compaction_keep_steps=1', '-c', 'compaction_min_gain_tokens=0'] },
  job: { approve: 'full-auto', outcome: 'completed' },
  workflow: { approve: 'full-auto', outcome: 'completed' },
};

/** The run mode the runs of `point` use: only points that need a person's act leave `full-auto`. */
export function modeFor(point: ChaosPoint): ChaosMode {
  switch (point) {
    case 'after:approval/granted':
      return 'ask';
    case 'after:inbox-reserved':
      return 'steer';
    case 'after:interrupt/requested':
      return 'interrupt';
    case 'after:ask/asked':
      return 'question';
    case 'after:budget-reserved':
      return 'budget';
    case 'after:goal/updated':
      return 'goal';
    case 'after:compaction/started':
    case 'before:checkpoint/committed':
      return 'compact';
    case 'after:job/started':
    case 'before:job/notified':
      return 'job';
    case 'after:node/ended':
      return 'workflow';
    default:
      return 'full-auto';
  }
}

/**
 * How long the first model call of an `interrupt` run waits before it answers. The interrupt
 * aborts the wait, so it costs nothing; it only has to outlast the start of `actorloop interrupt`
 * (a CLI start) on a loaded machine, and stay under the chaos command's child timeout.
 */
export const INTERRUPT_DELAY_MS = 20_000;

/** The option the `question` mode's question offers, which the driver answers with. */
export const QUESTION_OPTION = 'go';

/** The text of the steer a `steer` run sends. */
export const STEER_TEXT = 'chaos steer: carry on as planned';

/** The answer a `steer` run has left over for a steer a recovery gave back after the last step claimed it. */
const SPARE_ANSWER: ScriptResponse = { content: 'Noted; nothing more to do.', usage: { input_tokens: 300, output_tokens: 8 } };

/** The call a `question` run makes first. */
const QUESTION: ScriptResponse = {
  content: 'One question before I start.',
  tool_calls: [{ name: 'ask_user', arguments: { question: 'Go ahead with the notes?', options: [{ id: QUESTION_OPTION, label: 'Go ahead' }], allow_free_text: false } }],
  usage: { input_tokens: 300, output_tokens: 20 },
};

/** The call a `goal` run makes before its final answer: the goal, at revision 0, asked to complete. */
const COMPLETE_GOAL: ScriptResponse = {
  tool_calls: [{ name: 'update_goal', arguments: { phase: 'complete', reason: 'the task is done', expected_revision: 0 } }],
  usage: { input_tokens: 300, output_tokens: 20 },
};

/** The calls a `job` run makes first: a background job, then a wait for its notice. */
const START_JOB: ScriptResponse = {
  tool_calls: [{ name: 'start_job', arguments: { name: 'chaos-job', command: 'echo chaos-job >> job.log' } }],
  usage: { input_tokens: 300, output_tokens: 20 },
};
/** The file a `workflow` run writes and starts: a → b. */
export const CHAOS_WORKFLOW_FILE = 'chaos-wf.json';
const CHAOS_WORKFLOW = {
  name: 'chaos',
  nodes: [
    { id: 'a', run: 'shell', command: 'echo a >> wf.log' },
    { id: 'b', run: 'shell', command: 'echo b >> wf.log', needs: ['a'] },
  ],
};
const WRITE_WORKFLOW: ScriptResponse = {
  tool_calls: [{ name: 'write_file', arguments: { path: CHAOS_WORKFLOW_FILE, content: `${JSON.stringify(CHAOS_WORKFLOW)}\n` } }],
  usage: { input_tokens: 300, output_tokens: 40 },
};
const START_WORKFLOW: ScriptResponse = { tool_calls: [{ name: 'start_workflow', arguments: { file: CHAOS_WORKFLOW_FILE } }], usage: { input_tokens: 300, output_tokens: 10 } };
const WAIT_JOBS: ScriptResponse = { tool_calls: [{ name: 'wait_jobs', arguments: { timeout_seconds: 120 } }], usage: { input_tokens: 300, output_tokens: 10 } };

/** The responses of `mode` made from the scenario's (the main agent's); the same list for a mode that needs no change. */
export function responsesFor(mode: ChaosMode, responses: readonly ScriptResponse[]): ScriptResponse[] {
  switch (mode) {
    case 'full-auto':
    case 'ask':
    case 'budget':
    case 'compact':
      return [...responses];
    case 'steer':
      return [...responses, SPARE_ANSWER];
    case 'interrupt': {
      const [first, ...rest] = responses;
      return first ? [{ ...first, delay_ms: Math.max(first.delay_ms ?? 0, INTERRUPT_DELAY_MS) }, ...rest] : [];
    }
    case 'question':
      return [QUESTION, ...responses];
    case 'goal':
      return [...responses.slice(0, -1), COMPLETE_GOAL, ...responses.slice(-1)];
    case 'job':
      return [START_JOB, WAIT_JOBS, ...responses];
    case 'workflow':
      return [WRITE_WORKFLOW, START_WORKFLOW, WAIT_JOBS, ...responses];
  }
}

/** `script` with its main agent's responses made for `mode`. */
export function scriptFor(mode: ChaosMode, script: Script): Script {
  if ('responses' in script) return { responses: responsesFor(mode, script.responses) };
  const main = script.agents.main ?? { responses: [] };
  return { agents: { ...script.agents, main: { responses: responsesFor(mode, main.responses) } } };
}

/** True when `mode` runs the scenario's script unchanged. */
export function runsScriptAsIs(mode: ChaosMode): boolean {
  return mode === 'full-auto' || mode === 'ask' || mode === 'budget' || mode === 'compact';
}

/**
 * The script path each mode runs: the scenario's own, or its variant written to a directory
 * under `dir` (kept with the session's agents, whose settings name it).
 */
export async function scriptPaths(modes: Iterable<ChaosMode>, scriptPath: string, script: Script, dir: string): Promise<Map<ChaosMode, string>> {
  const paths = new Map<ChaosMode, string>();
  let into: string | null = null;
  for (const mode of modes) {
    if (runsScriptAsIs(mode)) {
      paths.set(mode, scriptPath);
      continue;
    }
    if (into === null) {
      await mkdir(dir, { recursive: true });
      into = await mkdtemp(join(dir, 'chaos-scripts-'));
    }
    const path = join(into, `${mode}.json`);
    await writeFile(path, `${JSON.stringify(scriptFor(mode, script), null, 2)}\n`);
    paths.set(mode, path);
  }
  return paths;
}
