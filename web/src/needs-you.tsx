import { useState } from 'preact/hooks';
import type { Rpc } from './api.js';
import { timeText } from './format.js';
import type { PendingItem } from './pending-item.js';
import { said, type Said } from './said.js';

export type { ApprovalItem, PendingItem, QuestionItem } from './pending-item.js';

// What waits on a person, first on every view: each approval and question pending in the tree
// shown (or, from the runs list, anywhere), with the actor that asks, what it asks (the preview an
// approval binds to: the diff, the command, the patch; the question and its options), when it
// expires, and its Approve / Deny / Answer controls inline. Each answer goes through the gateway's
// JSON-RPC as the CLI's would (an inbox message), and what happened is said in words.

interface CardProps {
  item: PendingItem;
  rpc: Rpc;
  /** False at a past position: actions act on now. */
  live: boolean;
  /** Shown with a link to the actor (from the runs list); absent: the actor is in view. */
  onOpen?: (actorId: string) => void;
  onSaid: (s: Said) => void;
}

function Who({ item, onOpen }: { item: PendingItem; onOpen?: (actorId: string) => void }) {
  return (
    <span class="who-asks">
      {onOpen
        ? <a href={`?actor=${encodeURIComponent(item.actorId)}`} onClick={(e) => { e.preventDefault(); onOpen(item.actorId); }}>{item.actorName}</a>
        : <b>{item.actorName}</b>}
      {' '}<code class="id">{item.actorId}</code>
    </span>
  );
}

function ApprovalCard({ item, rpc, live, onOpen, onSaid }: CardProps & { item: Extract<PendingItem, { kind: 'approval' }> }) {
  const a = item.approval;
  const agentId = item.actorId;
  const answer = (decision: 'approve' | 'deny'): void => {
    onSaid({ text: `${decision === 'approve' ? 'approving' : 'denying'} ${a.approvalId}…`, tone: 'busy' });
    const params = decision === 'approve'
      ? { agentId, approvalId: a.approvalId, decision, planDigest: a.planDigest }
      : { agentId, approvalId: a.approvalId, decision, planDigest: a.planDigest, reason: 'denied from the page' };
    rpc.call('approval.respond', params).then(
      (r) => onSaid(said(decision === 'approve'
        ? `approved ${a.approvalId} (${r.messageId}): the ${a.tool} call runs once ${item.actorName} reads it`
        : `denied ${a.approvalId} (${r.messageId}): ${item.actorName} is told the ${a.tool} call was refused`)),
      (e: Error) => onSaid({ text: `could not answer ${a.approvalId}: ${e.message}`, tone: 'error' }),
    );
  };
  return (
    <li class="pending approval" data-approval={a.approvalId} data-actor={agentId}>
      <div class="pending-head">
        <span class="pending-kind">approve</span> <b>{a.preview?.summary ?? a.tool}</b>
        <span class="muted"> · {a.tool} v{a.toolVersion}{a.rule ? ` · rule ${a.rule}` : ''}{a.reason ? ` · ${a.reason}` : ''}</span>
      </div>
      <div class="pending-who"><Who item={item} onOpen={onOpen} /> <span class="muted">· expires {timeText(new Date(a.expiresAt).toISOString())}</span></div>
      <pre class="plan">{a.preview ? a.preview.text : JSON.stringify(a.plan ?? {}, null, 2)}</pre>
      {a.preview?.truncated && <div class="muted">cut to its bound{a.preview.omitted ? `: ${a.preview.omitted}` : ''}</div>}
      <div class="digest muted" data-digest={a.planDigest}>binds to plan <code>{a.planDigest}</code></div>
      <div class="pending-buttons">
        <button class="approve" disabled={!live} onClick={() => answer('approve')}>Approve</button>
        <button class="deny" disabled={!live} onClick={() => answer('deny')}>Deny</button>
      </div>
    </li>
  );
}

function QuestionCard({ item, rpc, live, onOpen, onSaid }: CardProps & { item: Extract<PendingItem, { kind: 'question' }> }) {
  const q = item.question;
  const agentId = item.actorId;
  const [text, setText] = useState('');
  const send = (params: { optionId: string } | { text: string }, what: string): void => {
    onSaid({ text: `answering ${q.questionId}…`, tone: 'busy' });
    rpc.call('ask.answer', { agentId, questionId: q.questionId, ...params }).then(
      (r) => onSaid(said(`answered ${q.questionId} (${r.messageId}) with ${what}: ${item.actorName} goes on with it`)),
      (e: Error) => onSaid({ text: `could not answer ${q.questionId}: ${e.message}`, tone: 'error' }),
    );
  };
  return (
    <li class="pending question" data-question={q.questionId} data-actor={agentId}>
      <div class="pending-head"><span class="pending-kind">question</span> <b>{q.question}</b></div>
      <div class="pending-who"><Who item={item} onOpen={onOpen} /> <span class="muted">· expires {timeText(new Date(q.expiresAt).toISOString())}</span></div>
      <div class="pending-buttons">
        {q.options.map((o) => <button key={o.id} class="option" disabled={!live} onClick={() => send({ optionId: o.id }, `“${o.label}”`)}>{o.label}</button>)}
        {q.allowFreeText && (
          <form class="answer" onSubmit={(e) => { e.preventDefault(); send({ text }, q.sensitive ? 'a sensitive answer' : `“${text}”`); setText(''); }}>
            {q.sensitive
              ? <input aria-label="answer" type="password" value={text} onInput={(e) => setText((e.target as HTMLInputElement).value)} />
              : <input aria-label="answer" type="text" value={text} onInput={(e) => setText((e.target as HTMLInputElement).value)} />}
            <button disabled={!live}>Answer</button>
          </form>
        )}
      </div>
    </li>
  );
}

/** The "Needs you" panel: nothing when nothing waits on a person. */
export function NeedsYou({ items, rpc, live, onOpen, scope }: { items: readonly PendingItem[]; rpc: Rpc; live: boolean; onOpen?: (actorId: string) => void; scope: string }) {
  const [feedback, setFeedback] = useState<Said | null>(null);
  if (items.length === 0 && feedback === null) return null;
  return (
    <section class="needs-you" aria-label="needs you" data-count={items.length}>
      <h2>Needs you <span class="count">{items.length === 0 ? `nothing waits on a person ${scope}` : `${items.length} ${scope}`}</span></h2>
      {!live && items.length > 0 && <p class="note">time travel: these were pending then; an answer acts on now (press Live first)</p>}
      <ul class="pending-list">
        {items.map((item) => item.kind === 'approval'
          ? <ApprovalCard key={item.approval.approvalId} item={item} rpc={rpc} live={live} onOpen={onOpen} onSaid={setFeedback} />
          : <QuestionCard key={item.question.questionId} item={item} rpc={rpc} live={live} onOpen={onOpen} onSaid={setFeedback} />)}
      </ul>
      {feedback && <div class={`said ${feedback.tone}`} data-testid="needs-you-said">{feedback.text}</div>}
    </section>
  );
}
