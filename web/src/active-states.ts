import type { ActorEvent } from '../../src/protocol/events.js';
import type { ActorState } from './fold.js';

// Which state of each machine an actor is in, read from its folded events (design §11: the page
// never invents state the log does not hold). Each machine moves on the committed events it
// reacts to; the names below are the machines' own state paths, checked against the definitions
// the gateway serves by the page's test.

/** One machine instance the page draws: which definition, a title, its active state path and the one before. */
export interface MachineView {
  machine: 'agent' | 'turn' | 'step' | 'attempt' | 'tool-call';
  /** Which of the actor's machines it is, as `machines.subscribe` names them (`agent`, …, `tool-call:<callId>`). */
  key: string;
  title: string;
  /** Dotted path of the active state (`generating.attempting`); null: not started. */
  active: string | null;
  /** The state the last event that moved it left, for the transition to flash. */
  previous: string | null;
  /** Seq of the event that last moved it. */
  movedAt: number;
}

type Walk = (state: string | null, e: ActorEvent) => string | null;

/**
 * The agent machine's walk. Inside a turn it waits as the machine does: in `turn.waiting_approval`
 * while any approval of the turn is open (asked for, not yet granted or denied), else in
 * `turn.waiting_input` while a question is; so it keeps the open IDs, one walk per fold.
 */
function agentWalk(): Walk {
  const approvals = new Set<string>();
  const questions = new Set<string>();
  const inTurn = (): string => (approvals.size > 0 ? 'turn.waiting_approval' : questions.size > 0 ? 'turn.waiting_input' : 'turn.running');
  const waits = (s: string | null): string | null => (s?.startsWith('turn.') ? inTurn() : s);
  return (s, e) => {
    switch (e.type) {
      case 'inbox/received': return s === 'idle' || s === null ? 'claiming' : s;
      case 'turn/start':
        approvals.clear();
        questions.clear();
        return 'turn.running';
      case 'approval/requested':
        approvals.add(e.data.approvalId);
        return waits(s);
      case 'approval/granted':
      case 'approval/denied':
        approvals.delete(e.data.approvalId);
        return waits(s);
      case 'ask/asked':
        questions.add(e.data.questionId);
        return waits(s);
      case 'ask/answered':
        questions.delete(e.data.questionId);
        return waits(s);
      case 'turn/end':
        approvals.clear();
        questions.clear();
        return 'idle';
      case 'actor/stopped': return 'stopped';
      default: return s ?? 'idle';
    }
  };
}

const turnWalk: Walk = (s, e) => {
  switch (e.type) {
    case 'turn/start': return 'launching';
    case 'step/start': return 'stepping';
    case 'step/end': return e.data.outcome === 'tool_calls' ? 'launching' : 'ending';
    case 'turn/end': return 'done';
    default: return s;
  }
};

const stepWalk: Walk = (s, e) => {
  switch (e.type) {
    case 'step/start': return 'assembling';
    case 'compaction/started': return 'compacting';
    // a compaction's summary is an attempt of the step that keeps it in `compacting`
    case 'checkpoint/committed': return 'assembling';
    case 'compaction/rejected': return e.data.endsStep ? 'ending' : 'assembling';
    case 'request/prepared': return 'generating.launching';
    case 'attempt/start': return s === 'compacting' ? s : 'generating.attempting';
    case 'attempt/end':
      if (s === 'compacting') return e.data.outcome === 'aborted' ? 'ending' : s;
      // overflow: the request did not fit, it is assembled again (which compacts)
      return e.data.outcome === 'succeeded' ? 'accepting' : e.data.outcome === 'failed' ? 'generating.launching' : e.data.outcome === 'overflow' ? 'assembling' : 'ending';
    case 'assistant/accepted': return e.data.toolCalls.length > 0 ? 'tools' : 'ending';
    case 'assistant/rejected': return 'ending';
    case 'tool/call': case 'tool/result': case 'tool/denied': case 'tool/cancelled': case 'tool/outcome_unknown': return 'tools';
    case 'step/end': return 'done';
    default: return s;
  }
};

const attemptWalk: Walk = (s, e) => {
  if (e.type === 'attempt/start') return 'streaming';
  if (e.type === 'attempt/end') return e.data.outcome;
  return s;
};

const callWalk: Walk = (s, e) => {
  switch (e.type) {
    case 'tool/call': return e.data.status !== 'valid' ? 'rejecting' : !e.data.withinBudget ? 'cancelling' : 'deciding';
    case 'policy/decided': return e.data.decision === 'allow' ? 'starting' : e.data.decision === 'ask' ? 'awaiting_approval.requesting' : 'denying';
    case 'approval/requested': return s?.startsWith('confirming') ? 'confirming.waiting' : 'awaiting_approval.waiting';
    case 'approval/granted': return s?.startsWith('confirming') ? s : 'rechecking';
    case 'approval/denied': return s?.startsWith('confirming') ? s : 'denying';
    case 'tool/start': return 'started';
    case 'tool/reconciled': return e.data.verdict === 'applied' ? 'settling' : e.data.verdict === 'not_applied' ? 'restarting' : 'confirming.requesting';
    case 'tool/result': return 'result';
    case 'tool/denied': return 'denied';
    case 'tool/cancelled': return 'cancelled';
    case 'tool/outcome_unknown': return 'outcome_unknown';
    default: return s;
  }
};

function run(machine: MachineView['machine'], title: string, walk: Walk, events: readonly ActorEvent[], initial: string | null, key: string = machine): MachineView {
  let active = initial;
  let previous: string | null = null;
  let movedAt = 0;
  for (const e of events) {
    const next = walk(active, e);
    if (next !== active) {
      previous = active;
      active = next;
      movedAt = e.seq;
    }
  }
  return { machine, key, title, active, previous, movedAt };
}

/** True while a call waits on a person: for its approval (or a confirmation), or for the answer to the question it asked. */
function waitsOnPerson(v: MachineView, events: readonly ActorEvent[]): boolean {
  if (v.active?.endsWith('.waiting')) return true;
  const ask = events.findLast((e) => e.type === 'ask/asked' || e.type === 'ask/answered');
  return ask?.type === 'ask/asked';
}

/**
 * The machines of an actor at the position its state was folded to: the agent; then every tool
 * call that waits on a person (the deepest waiting state, where an operator looks first); then
 * its last turn, step and attempt, and the other tool calls of the last step that made any.
 */
export function machinesOf(a: ActorState): MachineView[] {
  const ev = a.events;
  const lastOf = (type: ActorEvent['type']): ActorEvent | undefined => ev.findLast((e) => e.type === type);
  const agent = run('agent', 'agent', agentWalk(), ev, 'idle');
  const out: MachineView[] = [];
  const turn = lastOf('turn/start');
  if (turn) out.push(run('turn', `turn ${turn.turn ?? ''}`, turnWalk, ev.filter((e) => e.turn === turn.turn && e.seq >= turn.seq), null));
  const step = lastOf('step/start');
  if (step) {
    const inStep = ev.filter((e) => e.step === step.step && e.seq >= step.seq);
    out.push(run('step', `step ${step.type === 'step/start' ? step.data.index : ''}`, stepWalk, inStep, null));
    const attempt = inStep.findLast((e) => e.type === 'attempt/start');
    const summary = attempt?.type === 'attempt/start' && attempt.data.kind === 'compaction' ? 'summary (compaction) ' : '';
    if (attempt) out.push(run('attempt', `${summary}attempt ${attempt.type === 'attempt/start' ? attempt.data.index : ''}`, attemptWalk, inStep.filter((e) => e.attempt === attempt.attempt), null));
  }
  // the calls of the last step that made any: a step answering after them still shows how they ended
  const waiting: MachineView[] = [];
  const lastCall = ev.findLast((e) => e.type === 'tool/call');
  if (lastCall) {
    const inStep = ev.filter((e) => e.step === lastCall.step);
    for (const c of inStep) {
      if (c.type !== 'tool/call' || c.call === undefined) continue;
      const ofCall = inStep.filter((e) => e.call === c.call);
      const view = run('tool-call', `tool call ${c.data.name} · ${c.call}`, callWalk, ofCall, null, `tool-call:${c.call}`);
      (waitsOnPerson(view, ofCall) ? waiting : out).push(view);
    }
  }
  return [agent, ...waiting, ...out];
}
