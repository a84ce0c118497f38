import { useState } from 'preact/hooks';
import type { ActorEvent } from '../../src/protocol/events.js';
import { outcomeWords } from '../../src/client/outcome-words.js';
import type { ActorState } from './fold.js';
import { costText, durationText, firstLine, timeText, tokensText } from './format.js';

// The top of the actor view: what an operator asks first of an actor. Its ID (as text, with a
// copy button: what `actorloop approve <agent> …` takes), name, kind and parent; its status with
// the reason in words (`stopped: step_budget — it took as many steps as its turn may`); its task,
// the step and tool it is in now, its answer, goal and plan; its usage and cost; where it works and
// which host holds it. All of it is the log's, folded to the position shown (time travel moves it),
// but the holder and the workspace: those are the gateway's word on now.

/** What the gateway's read of the actor adds (absent before it answered, or from a gateway that does not say). */
export interface ActorFacts {
  workspace?: string;
  holder?: { host: string; alive: boolean; expiresAt: string } | null;
  startedAt?: string;
}

/** The turn the summary speaks of (the open one, else the last), folded from the actor's events. */
interface TurnFacts {
  task: string | null;
  startedAt: string | null;
  endedAt: string | null;
  /** The last failed attempt's error of the turn: the words behind a `failed`. */
  error: string | null;
}

// by the actor's event array: live it grows in place, so it is read on from where it was
const turnsByEvents = new WeakMap<readonly ActorEvent[], { read: number; facts: TurnFacts; claimed: readonly string[] }>();

/** The task, times and last error of the actor's current or last turn. */
export function turnFacts(events: readonly ActorEvent[]): TurnFacts {
  let t = turnsByEvents.get(events);
  if (!t || t.read > events.length) {
    t = { read: 0, facts: { task: null, startedAt: null, endedAt: null, error: null }, claimed: [] };
    turnsByEvents.set(events, t);
  }
  for (; t.read < events.length; t.read++) {
    const e = events[t.read]!;
    if (e.type === 'turn/start') {
      t.facts = { task: null, startedAt: e.at, endedAt: null, error: null };
      t.claimed = e.data.messageIds;
    } else if (e.type === 'user/message' && t.claimed.includes(e.data.messageId) && t.facts.task === null) {
      t.facts = { ...t.facts, task: e.data.content };
    } else if (e.type === 'attempt/end' && e.data.error) {
      t.facts = { ...t.facts, error: `${e.data.error.class}: ${e.data.error.message}` };
    } else if (e.type === 'turn/end') {
      t.facts = { ...t.facts, endedAt: e.at };
    }
  }
  return t.facts;
}

function CopyId({ id }: { id: string }) {
  const [copied, setCopied] = useState(false);
  const copy = (): void => {
    void navigator.clipboard?.writeText(id).then(() => {
      setCopied(true);
      setTimeout(() => setCopied(false), 1500);
    }, () => {});
  };
  return (
    <span class="copy-id">
      <code class="id" data-testid="actor-id">{id}</code>
      <button class="copy" title="copy the ID" onClick={copy}>{copied ? 'copied' : 'copy'}</button>
    </span>
  );
}

/** A text shown in its first lines, the rest a click away. */
function Clipped({ text, lines = 3, testId }: { text: string; lines?: number; testId?: string }) {
  const [open, setOpen] = useState(false);
  const all = text.split('\n');
  const long = all.length > lines || text.length > 400;
  return (
    <div class="clipped" data-testid={testId}>
      <span class="text">{open || !long ? text : `${all.slice(0, lines).join('\n').slice(0, 400)}…`}</span>
      {long && <button class="more" onClick={() => setOpen(!open)}>{open ? 'less' : 'more'}</button>}
    </div>
  );
}

interface SummaryProps {
  actor: ActorState;
  name: string;
  kind: string;
  status: string;
  parent: { id: string; name: string } | null;
  facts: ActorFacts | null;
  onSelect: (id: string) => void;
}

/** The actor summary card. */
export function ActorSummary({ actor, name, kind, status, parent, facts, onSelect }: SummaryProps) {
  const p = actor.projection;
  const turn = turnFacts(actor.events);
  const last = p.lastTurn;
  const ended = p.openTurn === null && last !== null;
  const calls = p.pending.calls;
  const running = calls.find((c) => c.started && c.observation === null) ?? calls.find((c) => c.observation === null);
  const usage = p.usage;
  const started = turn.startedAt;
  const duration = started === null ? null : (turn.endedAt === null ? null : Date.parse(turn.endedAt) - Date.parse(started));
  const reason = ended ? outcomeWords(last.outcome, last.reason ?? (last.outcome === 'failed' ? turn.error : null)) : null;
  return (
    <section class="summary" aria-label="actor summary" data-actor={actor.actorId}>
      <div class="summary-head">
        <h2 class="actor-name">{name}</h2>
        <span class="muted">{kind}</span>
        <span class={`badge status-${status}`} data-testid="summary-status">{status.replace('_', ' ')}</span>
        <CopyId id={actor.actorId} />
      </div>
      {reason !== null && last!.outcome !== 'completed' && <div class={`reason outcome-${last!.outcome}`} data-testid="summary-reason">{reason}</div>}
      <dl class="facts">
        {parent && (
          <><dt>parent</dt><dd><a href={`?actor=${encodeURIComponent(parent.id)}`} onClick={(e) => { e.preventDefault(); onSelect(parent.id); }}>{parent.name}</a> <code class="id">{parent.id}</code></dd></>
        )}
        {turn.task !== null && <><dt>task</dt><dd><Clipped text={turn.task} testId="summary-task" /></dd></>}
        {p.openTurn && (
          <><dt>now</dt><dd data-testid="summary-now">
            turn {p.turns + 1}{p.openStep ? ` · step ${p.openStep.index}` : ' · between steps'}
            {running ? ` · ${running.name}${running.started ? ' running' : ''}` : p.openAttempt ? ' · model answering' : ''}
            {p.parked ? ` · waiting for ${p.parked.waitingFor === 'approval' ? 'an approval' : 'an answer'}` : ''}
          </dd></>
        )}
        {ended && last.answer && <><dt>answer</dt><dd><Clipped text={last.answer} testId="summary-answer" /></dd></>}
        {p.goal && (
          <><dt>goal</dt><dd>{firstLine(p.goal.objective, 200)} <span class="muted">· {p.goal.phase}{p.goal.reason ? ` (${p.goal.reason})` : ''} · revision {p.goal.revision}</span></dd></>
        )}
        {p.plan && (
          <><dt>plan</dt><dd>
            <ol class="plan-items">{p.plan.items.map((i, k) => <li key={k} class={`plan-${i.status}`}>{i.status === 'completed' ? '✓' : i.status === 'in_progress' ? '▸' : '○'} {i.content}</li>)}</ol>
          </dd></>
        )}
        <dt>usage</dt>
        <dd data-testid="summary-usage">
          {tokensText(usage.inputTokens + usage.outputTokens)} <span class="muted">({usage.inputTokens.toLocaleString('en-US')} in, {usage.outputTokens.toLocaleString('en-US')} out{usage.estimated ? ', estimated' : ''})</span> · {costText(actor.costUsd)} · {p.turns + (p.openTurn ? 1 : 0)} turn{p.turns + (p.openTurn ? 1 : 0) === 1 ? '' : 's'}
        </dd>
        {started !== null && (
          <><dt>turn</dt><dd>started {timeText(started)}{turn.endedAt ? ` · ended ${timeText(turn.endedAt)}` : ''}{duration !== null ? ` · took ${durationText(duration)}` : ''}</dd></>
        )}
        {facts?.workspace && <><dt>workspace</dt><dd><code>{facts.workspace}</code></dd></>}
        {facts?.holder !== undefined && (
          <><dt>held by</dt><dd data-testid="summary-holder">{facts.holder === null ? <span class="muted">no host holds it now</span> : <>{facts.holder.host} <span class={facts.holder.alive ? 'muted' : 'dead'}>{facts.holder.alive ? `· lease to ${timeText(facts.holder.expiresAt)}` : '· gone (its lease lapses)'}</span></>}</dd></>
        )}
      </dl>
    </section>
  );
}
