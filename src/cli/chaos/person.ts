import type { Violation } from '../../verify/verify.js';
import type { ActorEvent } from '../../protocol/events.js';
import {
  agentOf, pendingApprovals, pendingQuestions, printedEvents, spawnCli, startChild, tail, waitFor,
  type ChaosContext, type Child, type ProcessRecord,
} from './child.js';
import { QUESTION_OPTION, STEER_TEXT, type ChaosMode } from './modes.js';

/** How long `interrupt` may take to see the turn end after the run's processes ended it. */
const INTERRUPT_GRACE_MS = 10_000;

/** What the driver does after a process stopped for a person (exit 5). */
export type AtWait =
  /** Start this command (`approve` or `answer`) next. */
  | { kind: 'next'; args: string[] }
  /** The log waits on nothing this driver answers. */
  | { kind: 'none' }
  /** An act failed (its violation is recorded): the run stops. */
  | { kind: 'failed' };

/**
 * The acts of a person a run's mode calls for, done by either driver (`drive`, `driveWithHosts`)
 * the same way, each once per run: approvals and questions answered at every wait, the steer of
 * a `steer` run sent at its first wait, the interrupt of an `interrupt` run started once its
 * first model call is open and waited for at the end. Each act's process joins the run's
 * processes; an act that fails, or a mode's act that never happened, is a violation.
 */
export class PersonActs {
  private steered = false;
  private compacted = false;
  private interrupter: Child | null = null;

  constructor(
    private readonly ctx: ChaosContext,
    private readonly mode: ChaosMode,
    private readonly processes: ProcessRecord[],
    private readonly violations: Violation[],
  ) {}

  /**
   * In an `interrupt` run, waits until `child` named its agent and printed the `attempt/start` of
   * its first model call (which the mode's script holds open), then starts `actorloop interrupt`;
   * nothing in other modes, or once it was started. Without --in-process: whoever runs the agent
   * takes the interrupt as mail, and the command follows the turn to its end.
   */
  async interruptWhenOpen(child: Child): Promise<void> {
    if (this.mode !== 'interrupt' || this.interrupter !== null) return;
    const open = (): boolean => agentOf(child.stderr()) !== null && printedEvents(child.stdout()).some((e) => e.type === 'attempt/start');
    if (!(await waitFor(open, child.exited, this.ctx.childTimeoutMs, this.ctx.signal))) return;
    this.interrupter = startChild(this.ctx, ['interrupt', agentOf(child.stderr())!, '--json', ...this.ctx.common], this.ctx.childTimeoutMs);
  }

  /**
   * After a process exited 5: a `steer` run's steer first (at its first wait only, so it lands
   * between the same two steps every time), then the command that answers what `log` waits on:
   * the first pending approval with `approve`, else the first pending question with `answer`.
   */
  async atWait(agentId: string, log: readonly ActorEvent[]): Promise<AtWait> {
    if (this.mode === 'steer' && !this.steered) {
      this.steered = true;
      const sent = await spawnCli(this.ctx, ['send', agentId, STEER_TEXT, '--steer', '--no-follow', '--json']);
      this.processes.push({ command: 'send', fault: null, code: sent.code, signal: sent.signal, killedByFault: false, ms: sent.ms });
      if (sent.code !== 0) {
        this.violations.push({ code: 'chaos.steer_not_sent', seq: null, message: `send --steer exited ${sent.code ?? sent.signal}: ${tail(sent.stderr)}` });
        return { kind: 'failed' };
      }
    }
    if (this.mode === 'compact' && !this.compacted) {
      this.compacted = true;
      const asked = await spawnCli(this.ctx, ['compact', agentId, '--json']);
      this.processes.push({ command: 'compact', fault: null, code: asked.code, signal: asked.signal, killedByFault: false, ms: asked.ms });
      if (asked.code !== 0) {
        this.violations.push({ code: 'chaos.compact_not_sent', seq: null, message: `compact exited ${asked.code ?? asked.signal}: ${tail(asked.stderr)}` });
        return { kind: 'failed' };
      }
    }
    const approval = pendingApprovals(log)[0];
    if (approval) return { kind: 'next', args: ['approve', agentId, approval] };
    const question = pendingQuestions(log)[0];
    if (question) return { kind: 'next', args: ['answer', agentId, question, '--option', QUESTION_OPTION] };
    return { kind: 'none' };
  }

  /**
   * At the end of the run: the interrupt is given a grace to see the turn end (it follows it),
   * then stopped and recorded; a mode's act that never happened is a violation (when nothing
   * else went wrong first, which would explain it).
   */
  async finish(): Promise<void> {
    const quiet = (): boolean => this.violations.length === 0 && !this.ctx.signal.aborted;
    if (this.interrupter) {
      if (quiet()) await waitFor(() => false, this.interrupter.exited, INTERRUPT_GRACE_MS, this.ctx.signal);
      const r = await this.interrupter.stop(0);
      this.processes.push({ command: 'interrupt', fault: null, code: r.code, signal: r.signal, killedByFault: false, ms: r.ms });
      if (r.code !== 0 && quiet()) {
        this.violations.push({ code: 'chaos.interrupt_failed', seq: null, message: `interrupt exited ${r.code ?? r.signal} (expected 0): ${tail(r.stderr)}` });
      }
    } else if (this.mode === 'interrupt' && quiet()) {
      this.violations.push({ code: 'chaos.interrupt_not_sent', seq: null, message: 'the first process ended before its model call was open: no interrupt was sent' });
    }
    if (this.mode === 'compact' && !this.compacted && quiet()) {
      this.violations.push({ code: 'chaos.compact_not_sent', seq: null, message: 'the turn never waited for an approval, so no compaction was asked for: the compact mode needs a scenario with a call that asks (a write or a shell command)' });
    }
    if (this.mode === 'steer' && !this.steered && quiet()) {
      this.violations.push({ code: 'chaos.steer_not_sent', seq: null, message: 'the turn never waited for an approval, so no steer was sent: the steer mode needs a scenario with a call that asks (a write or a shell command)' });
    }
  }
}
