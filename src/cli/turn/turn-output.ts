import type { TurnEnded } from '../../actors/actor/hosted-agent.js';
import { STATUS_AFTER_TURN, type ActorDirectory, type ActorStatus } from '../../bus/directory.js';
import type { TurnOutcome } from '../../protocol/events.js';
import type { Projection } from '../../store/projection.js';
import { exitCodeFor, EXIT } from '../exit-codes.js';
import type { Out } from '../output.js';
import type { RunPrinter } from '../run-printer.js';
import { terminalText } from '../../client/terminal-text.js';
import { describeApproval } from './approval-prompt.js';
import { answerCommandsFor, describeQuestion } from './question-prompt.js';
import { cliLine, placeholder, type WhereConfig } from '../hints.js';
import { COMPLETION_EXHAUSTED, COMPLETION_EXHAUSTED_STOP } from '../../protocol/completion.js';

const STATUS: Record<TurnOutcome, ActorStatus> = STATUS_AFTER_TURN;

/** Records an actor's status in the directory (a cache of its log, for `runs`). */
export async function setStatus(directory: Pick<ActorDirectory, 'get' | 'put'>, actorId: string, status: ActorStatus): Promise<void> {
  const entry = await directory.get(actorId);
  if (entry) await directory.put({ ...entry, status, updatedAt: new Date().toISOString() });
}

/** Where a turn's end (or its wait for a person) is printed, and its directory status kept. */
export interface TurnOutput {
  directory: Pick<ActorDirectory, 'get' | 'put'>;
  printer: RunPrinter;
  out: Out;
  json: boolean;
}

/** The agent whose turn is printed: its ID and its state as the log has it. */
export interface TurnSubject {
  actorId: string;
  projection: Projection;
}

/**
 * Records the outcome in the directory, prints the answer and the outcome line (and what a person
 * does next, in command lines that reach the agent where `config` did), and returns the exit code.
 */
export async function printTurnEnd(o: TurnOutput, agent: TurnSubject, ended: TurnEnded, config: WhereConfig): Promise<number> {
  const { out } = o;
  await setStatus(o.directory, agent.actorId, STATUS[ended.outcome]);
  o.printer.endLine();
  if (!o.json) {
    // the turn's own tokens, named so: the agent's total over its turns is `inspect`'s to show
    const usage = ended.usage ?? agent.projection.usage;
    const tokens = `${ended.usage ? 'turn ' : 'agent '}${(usage.inputTokens + usage.outputTokens).toLocaleString('en-US')} tokens${usage.estimated ? ' (estimated)' : ''}`;
    const cost = ended.costUsd === null ? 'cost unknown' : `$${ended.costUsd.toFixed(4)}`;
    const outcome = `${ended.outcome}${ended.reason ? ` (${terminalText(ended.reason)})` : ''} · ${tokens} · ${cost}\n${personAsked(config, agent, ended)}`;
    if (out.quiet) {
      // --quiet: the answer alone on stdout; a turn that did not complete says why on stderr
      if (ended.answer) out.stdout.write(`${terminalText(ended.answer, 'block')}\n`);
      if (ended.outcome !== 'completed') out.stderr.write(outcome);
      return exitCodeFor(ended.outcome);
    }
    // streamed on a terminal as the model wrote it: not printed twice
    const streamed = ended.answer !== null && o.printer.answerShown(ended.answer);
    if (ended.answer && !streamed) out.stdout.write(`\n${terminalText(ended.answer, 'block')}\n\n`);
    else if (streamed) out.stdout.write('\n');
    out.stdout.write(outcome);
  }
  return exitCodeFor(ended.outcome);
}

/**
 * No one to ask here: say what waits and how to answer it (command lines that reach the agent
 * where `config` did), and return exit 5 (waiting for a person).
 */
export async function printWaiting(o: TurnOutput, agent: TurnSubject, waiting: string[], config: WhereConfig): Promise<number> {
  await setStatus(o.directory, agent.actorId, 'waiting');
  const lines: string[] = [];
  if (agent.projection.parked?.waitingFor === 'question') {
    for (const questionId of waiting) {
      const q = agent.projection.questions?.[questionId];
      if (!q) continue;
      lines.push(`waiting for an answer to question ${questionId}`, ...describeQuestion(questionId, q).map((l) => `  ${l}`));
      lines.push(...answerCommandsFor(config, agent.actorId, questionId, q).map((c) => `answer: ${c}`));
    }
    o.out.stderr.write(`${lines.join('\n')}\n`);
    return EXIT.waiting;
  }
  for (const approvalId of waiting) {
    const approval = agent.projection.approvals?.[approvalId];
    if (!approval) continue;
    lines.push(`waiting for approval ${approvalId}`, ...describeApproval(approvalId, approval).map((l) => `  ${l}`));
  }
  const first = waiting[0]!;
  lines.push(
    `approve: ${cliLine(config, 'approve', agent.actorId, first)}`,
    `deny:    ${cliLine(config, 'deny', agent.actorId, first, placeholder('[--reason "<why>"]'))}`,
  );
  o.out.stderr.write(`${lines.join('\n')}\n`);
  return EXIT.waiting;
}

/**
 * The lines that ask the person when the completion policy refused every answer it allows: the
 * runtime will not guess what "done" is, so the person says how to go on (empty otherwise). Under
 * `block` the goal waits blocked: it is resumed first, or its next turn would not work toward it.
 */
function personAsked(config: WhereConfig, agent: TurnSubject, ended: TurnEnded): string {
  const id = agent.actorId;
  const goOn = cliLine(config, 'run', '--continue', id, placeholder('"<what to do>"'));
  if (ended.outcome === 'failed' && ended.reason?.startsWith(COMPLETION_EXHAUSTED)) {
    return `you decide: tell the agent what it still lacks with \`${goOn}\`\n`;
  }
  const g = agent.projection.goal;
  if (ended.outcome !== 'stopped' || ended.reason !== COMPLETION_EXHAUSTED_STOP || !g) return '';
  return [
    `goal ${g.id} is ${g.phase}${g.reason ? ` (${terminalText(g.reason)})` : ''}`,
    `you decide: resume it with \`${cliLine(config, 'goal', id, 'resume')}\`, then tell the agent what it still lacks with \`${goOn}\``,
    '',
  ].join('\n');
}
