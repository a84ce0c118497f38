import { useEffect, useState } from 'preact/hooks';
import type { Projection } from '../../src/store/projection.js';
import { getJson, type Rpc } from './api.js';
import type { RpcParams } from '../../src/protocol/gateway.js';
import { said, type Said } from './said.js';
import type { FaultOrderPoint } from '../../src/protocol/fault-points.js';

/** What the page's message box sends: the kinds `inbox.send` takes. */
type MessageKind = RpcParams<'inbox.send'>['kind'];

// What an operator may do to the selected actor, each through the gateway's JSON-RPC (every
// command becomes an inbox message or a fault order, never a call into an actor): steer / inject /
// follow up, interrupt, compact (a checkpoint at the next step boundary), and kill when the gateway allows faults (now, or at a fault point the
// agent reaches next: the points are read from the gateway's own schema, so the page keeps no
// copy of the list). Approvals and questions are answered in "Needs you" (needs-you.tsx). Only
// live: a past position has nothing to act on. What each did is said in words.

/** The fault points `fault.kill` takes, from `GET /v1/schema`; just `now` when it cannot say. */
async function faultPoints(): Promise<FaultOrderPoint[]> {
  type Schema = { schemas?: Record<string, { properties?: { point?: { enum?: unknown } } }> };
  const r = await getJson<Schema>('/v1/schema').catch(() => ({}) as Schema);
  const points = r.schemas?.['rpc.fault.kill.params']?.properties?.point?.enum;
  const named = Array.isArray(points) ? points.filter((p): p is FaultOrderPoint => typeof p === 'string' && p !== 'now') : [];
  return ['now', ...named];
}

/** How each kind of message is named in what the page says. */
const KIND_WORDS: Record<MessageKind, string> = { steer: 'steer', inject: 'injected message', follow_up: 'follow-up' };

/** The actions panel of one actor. */
export function Actions({ agentId, name, projection, rpc, live, faultsAllowed }: { agentId: string; name: string; projection: Projection; rpc: Rpc; live: boolean; faultsAllowed: boolean }) {
  const [feedback, setFeedback] = useState<Said | null>(null);
  const [text, setText] = useState('');
  const [kind, setKind] = useState<MessageKind>('steer');
  const [points, setPoints] = useState<FaultOrderPoint[]>(['now']);
  const [point, setPoint] = useState<FaultOrderPoint>('now');
  useEffect(() => {
    if (faultsAllowed) void faultPoints().then(setPoints);
  }, [faultsAllowed]);
  const act = <T,>(what: string, call: Promise<T>, done: (r: T) => string): void => {
    setFeedback({ text: `${what}…`, tone: 'busy' });
    call.then((r) => setFeedback(said(done(r))), (e: Error) => setFeedback({ text: `${what} failed: ${e.message}`, tone: 'error' }));
  };
  const send = (): void => {
    if (text.trim() === '') return;
    const k = kind;
    act(`sending the ${KIND_WORDS[k]}`, rpc.call('inbox.send', { agentId, kind: k, content: text }), (r) =>
      `sent the ${KIND_WORDS[k]} (${r.messageId}): ${k === 'follow_up' ? `${name} takes it as its next turn` : `${name} reads it at its next step`}`);
    setText('');
  };
  return (
    <section class="actions" aria-label="actions">
      <h2>Actions</h2>
      {!live && <p class="note">time travel: actions act on now; press Live first</p>}
      <form class="steer" onSubmit={(e) => { e.preventDefault(); send(); }}>
        <select aria-label="message kind" value={kind} onChange={(e) => setKind((e.target as HTMLSelectElement).value as MessageKind)}>
          <option value="steer">steer</option>
          <option value="inject">inject</option>
          <option value="follow_up">follow-up</option>
        </select>
        <input aria-label="message" placeholder={`say something to ${name}`} value={text} onInput={(e) => setText((e.target as HTMLInputElement).value)} />
        <button disabled={!live}>Send</button>
      </form>
      <div class="buttons">
        <button class="interrupt" disabled={!live || projection.openTurn === null}
          onClick={() => act('interrupting', rpc.call('turn.interrupt', { agentId }), (r) => `interrupt sent (${r.messageId}): ${name}'s turn ends at its next safe point`)}>Interrupt</button>
        {/* idle, it compacts at its next turn's first step; a stopped agent takes no more turns */}
        <button class="compact" disabled={!live || projection.stopped}
          onClick={() => act('asking for a checkpoint', rpc.call('turn.compact', { agentId }), (r) => projection.openTurn === null
            ? `compact sent (${r.messageId}): ${name} has no open turn, it compacts at the first step of its next turn`
            : `compact sent (${r.messageId}): ${name} compacts at its next step boundary`)}>Compact</button>
        {faultsAllowed && (
          <span class="kill-at">
            <select aria-label="kill at" value={point} onChange={(e) => setPoint((e.target as HTMLSelectElement).value as FaultOrderPoint)}>
              {points.map((p) => <option key={p} value={p}>{p === 'now' ? 'now' : `at ${p}`}</option>)}
            </select>
            <button class="kill" disabled={!live}
              onClick={() => act('killing the host', rpc.call('fault.kill', point === 'now' ? { agentId } : { agentId, point }), (r) => r.status === 'killed'
                ? `host ${r.hostId} (pid ${r.pid}) SIGKILLs itself now: another host takes ${name} over once its lease lapses`
                : `host ${r.hostId} (pid ${r.pid}) is armed: it SIGKILLs itself when ${name} reaches ${r.point}`)}>Kill host</button>
          </span>
        )}
      </div>
      <div class={`said ${feedback?.tone ?? ''}`} data-testid="rpc-said">{feedback?.text ?? ''}</div>
    </section>
  );
}
