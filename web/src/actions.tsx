import { useEffect, useState } from 'preact/hooks';
import { pendingApprovals, pendingQuestions, type Projection } from '../../src/store/projection.js';
import { getJson, type Rpc } from './api.js';
import type { RpcMethod, RpcParams } from '../../src/protocol/gateway.js';
import type { FaultOrderPoint } from '../../src/protocol/fault-points.js';

/** What the page's message box sends: the kinds `inbox.send` takes. */
type MessageKind = RpcParams<'inbox.send'>['kind'];

// What an operator may do to the selected actor, each through the gateway's JSON-RPC (every
// command becomes an inbox message or a fault order, never a call into an actor): answer a
// pending approval (the exact tool, plan and plan digest it binds to are shown, and the digest is
// sent back so an answer cannot approve another plan), answer a question, steer / inject /
// follow up, interrupt, and kill when the gateway allows faults (now, or at a fault point the
// agent reaches next: the points are read from the gateway's own schema, so the page keeps no
// copy of the list). Only live: a past position has nothing to act on.

/** The fault points `fault.kill` takes, from `GET /v1/schema`; just `now` when it cannot say. */
async function faultPoints(): Promise<FaultOrderPoint[]> {
  type Schema = { schemas?: Record<string, { properties?: { point?: { enum?: unknown } } }> };
  const r = await getJson<Schema>('/v1/schema').catch(() => ({}) as Schema);
  const points = r.schemas?.['rpc.fault.kill.params']?.properties?.point?.enum;
  const named = Array.isArray(points) ? points.filter((p): p is FaultOrderPoint => typeof p === 'string' && p !== 'now') : [];
  return ['now', ...named];
}

/** The actions panel of one actor. */
export function Actions({ agentId, projection, rpc, live, faultsAllowed }: { agentId: string; projection: Projection; rpc: Rpc; live: boolean; faultsAllowed: boolean }) {
  const [said, setSaid] = useState<string>('');
  const [text, setText] = useState('');
  const [kind, setKind] = useState<MessageKind>('steer');
  const [answers, setAnswers] = useState<Record<string, string>>({});
  const [points, setPoints] = useState<FaultOrderPoint[]>(['now']);
  const [point, setPoint] = useState<FaultOrderPoint>('now');
  useEffect(() => {
    if (faultsAllowed) void faultPoints().then(setPoints);
  }, [faultsAllowed]);
  const send = <M extends RpcMethod>(method: M, params: RpcParams<M>): void => {
    setSaid(`${method}…`);
    rpc.call(method, params).then(
      (r) => setSaid(`${method}: ${JSON.stringify(r)}`),
      (e: Error) => setSaid(`${method} failed: ${e.message}`),
    );
  };
  const approvals = pendingApprovals(projection);
  const questions = pendingQuestions(projection);
  return (
    <section class="actions" aria-label="actions">
      <h2>Actions</h2>
      {!live && <p class="note">time travel: actions act on now; press live first</p>}
      {approvals.map((a) => (
        <div key={a.approvalId} class="approval" data-approval={a.approvalId}>
          <div><b>approve {a.tool}</b> <span class="muted">v{a.toolVersion} · rule {a.rule ?? '?'}{a.reason ? ` · ${a.reason}` : ''}</span></div>
          {a.preview && <div class="summary">{a.preview.summary}</div>}
          <pre class="plan">{a.preview ? a.preview.text : JSON.stringify(a.plan ?? {}, null, 2)}</pre>
          <div class="digest" data-digest={a.planDigest}>plan digest <code>{a.planDigest}</code></div>
          <div class="muted">expires {new Date(a.expiresAt).toISOString()}</div>
          <button class="approve" disabled={!live} onClick={() => send('approval.respond', { agentId, approvalId: a.approvalId, decision: 'approve', planDigest: a.planDigest })}>Approve</button>
          <button class="deny" disabled={!live} onClick={() => send('approval.respond', { agentId, approvalId: a.approvalId, decision: 'deny', planDigest: a.planDigest, reason: 'denied from the page' })}>Deny</button>
        </div>
      ))}
      {questions.map((q) => (
        <div key={q.questionId} class="question" data-question={q.questionId}>
          <div><b>question</b> {q.question}</div>
          {q.options.map((o) => <button key={o.id} disabled={!live} onClick={() => send('ask.answer', { agentId, questionId: q.questionId, optionId: o.id })}>{o.label}</button>)}
          {q.allowFreeText && (
            <form onSubmit={(e) => { e.preventDefault(); send('ask.answer', { agentId, questionId: q.questionId, text: answers[q.questionId] ?? '' }); }}>
              {q.sensitive
                ? <input aria-label="answer" type="password" value={answers[q.questionId] ?? ''} onInput={(e) => setAnswers({ ...answers, [q.questionId]: (e.target as HTMLInputElement).value })} />
                : <input aria-label="answer" type="text" value={answers[q.questionId] ?? ''} onInput={(e) => setAnswers({ ...answers, [q.questionId]: (e.target as HTMLInputElement).value })} />}
              <button disabled={!live}>Answer</button>
            </form>
          )}
        </div>
      ))}
      <form class="steer" onSubmit={(e) => { e.preventDefault(); if (text.trim() === '') return; send('inbox.send', { agentId, kind, content: text }); setText(''); }}>
        <select aria-label="message kind" value={kind} onChange={(e) => setKind((e.target as HTMLSelectElement).value as MessageKind)}>
          <option value="steer">steer</option>
          <option value="inject">inject</option>
          <option value="follow_up">follow-up</option>
        </select>
        <input aria-label="message" placeholder="say something to the agent" value={text} onInput={(e) => setText((e.target as HTMLInputElement).value)} />
        <button disabled={!live}>Send</button>
      </form>
      <div class="buttons">
        <button class="interrupt" disabled={!live || projection.openTurn === null} onClick={() => send('turn.interrupt', { agentId })}>Interrupt</button>
        {faultsAllowed && (
          <span class="kill-at">
            <select aria-label="kill at" value={point} onChange={(e) => setPoint((e.target as HTMLSelectElement).value as FaultOrderPoint)}>
              {points.map((p) => <option key={p} value={p}>{p === 'now' ? 'now' : `at ${p}`}</option>)}
            </select>
            <button class="kill" disabled={!live} onClick={() => send('fault.kill', point === 'now' ? { agentId } : { agentId, point })}>Kill host</button>
          </span>
        )}
      </div>
      <div class="said" data-testid="rpc-said">{said}</div>
    </section>
  );
}
