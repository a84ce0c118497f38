import { useEffect, useState } from 'preact/hooks';
import type { JobPhase } from '../../src/protocol/job-events.js';
import { getJson, type Rpc } from './api.js';
import { jobEnded, type JobDetailRead } from './job-api.js';
import type { ActorState } from './fold.js';
import { durationText, timeText } from './format.js';
import { said, type Said } from './said.js';

// A job as the page shows it once selected (design §11b): what it runs, its phase and why, its
// attempts, exit code and how long it took, its owner, its place in the queue while it waits, and
// its output's last lines; and a Cancel button while it can still be stopped, which calls
// `job.cancel` (an interrupt to the job's inbox, that its host takes as a cancel). All of it is
// the job's own log, folded to the position shown (time travel moves it), but the queue place:
// that is the gateway's word on now (the host keeps it in the directory, not the log).
//
// Live output: a job's host publishes its output as it comes on the job's live subject (core
// NATS, never stored); a gateway given the bus's live source relays it (`GET /v1/jobs/:id/output`),
// and the page shows it while the job runs (the last 64 KB). Best effort: once the job ends, the
// tail its terminal `job/phase` commits is shown instead, as the record. A gateway that relays
// none says so, and the page says the tail shows once the job ends.

/** Between two reads of a job's queue place while live. */
const QUEUE_REFRESH_MS = 2000;

/** How much of a running job's live output the page keeps (the end of it). */
const LIVE_KEEP_CHARS = 64 * 1024;

/** Where the live output stands: not asked, connecting, open, or not relayed by this gateway. */
type LiveState = 'off' | 'connecting' | 'open' | 'none';

/** A running job's live output through the gateway, while `on`: what came so far and where the stream stands. */
function useLiveOutput(jobId: string, on: boolean): { text: string; state: LiveState } {
  const [text, setText] = useState('');
  const [state, setState] = useState<LiveState>('off');
  useEffect(() => {
    setText('');
    if (!on) return void setState('off');
    setState('connecting');
    let opened = false;
    const source = new EventSource(`/v1/jobs/${encodeURIComponent(jobId)}/output`);
    source.addEventListener('ready', () => {
      opened = true;
      setState('open');
    });
    source.addEventListener('job/output', (m: MessageEvent<string>) => {
      let chunk: { text?: unknown };
      try {
        chunk = JSON.parse(m.data) as { text?: unknown };
      } catch {
        return;
      }
      if (typeof chunk.text === 'string') {
        const t = chunk.text;
        setText((old) => (old + t).slice(-LIVE_KEEP_CHARS));
      }
    });
    source.onerror = () => {
      // refused (the gateway relays none, or no such job): an EventSource does not try again
      if (source.readyState === EventSource.CLOSED) setState(opened ? 'off' : 'none');
      // a drop after it opened: it reconnects by itself (a chunk meanwhile is lost, as live output may be)
      else if (opened) setState('connecting');
    };
    return () => source.close();
  }, [jobId, on]);
  return { text, state };
}

/** The phases a job may still be stopped in: a reconciling one is being checked, and ends by itself. */
const CANCELLABLE: ReadonlySet<JobPhase> = new Set(['pending', 'running']);

/** The gateway's word on a job's queue place, read again while live and it has not started. */
function useQueuePosition(jobId: string, live: boolean, waiting: boolean): number | null {
  const [position, setPosition] = useState<number | null>(null);
  useEffect(() => {
    setPosition(null);
    if (!waiting) return;
    let stopped = false;
    const read = (): void => void getJson<JobDetailRead>(`/v1/jobs/${encodeURIComponent(jobId)}`).then((d) => !stopped && setPosition(d.job.queuePosition), () => {});
    read();
    if (!live) return () => void (stopped = true);
    const every = setInterval(read, QUEUE_REFRESH_MS);
    return () => {
      stopped = true;
      clearInterval(every);
    };
  }, [jobId, live, waiting]);
  return position;
}

interface JobPanelProps {
  actor: ActorState;
  rpc: Rpc;
  live: boolean;
  owner: { id: string; name: string } | null;
  onSelect: (id: string) => void;
}

/** The panel of a selected job. */
export function JobPanel({ actor, rpc, live, owner, onSelect }: JobPanelProps) {
  const job = actor.job!;
  const [feedback, setFeedback] = useState<Said | null>(null);
  const ended = jobEnded(job.phase);
  const queuePosition = useQueuePosition(job.jobId, live, job.phase === 'pending' && job.attempts === 0);
  const end = job.end;
  const ex = job.executor;
  const liveOutput = useLiveOutput(job.jobId, live && job.phase === 'running');
  const cancel = (): void => {
    setFeedback({ text: 'cancelling…', tone: 'busy' });
    rpc.call('job.cancel', { jobId: job.jobId }).then(
      (r) => setFeedback(said(`cancel sent (${r.messageId}): ${job.name} is stopped by its host, and its log ends it cancelled`)),
      (e: Error) => setFeedback({ text: `cancel failed: ${e.message}`, tone: 'error' }),
    );
  };
  return (
    <section class="summary job-panel" aria-label="job" data-job={job.jobId} data-phase={job.phase}>
      <div class="summary-head">
        <h2 class="actor-name">{job.name}</h2>
        <span class="muted">job · {ex.kind}</span>
        <span class={`badge status-${job.phase}`} data-testid="job-phase">{job.phase}</span>
        <code class="id" data-testid="job-id">{job.jobId}</code>
      </div>
      {job.message !== null && <div class={`reason outcome-${job.phase}`} data-testid="job-message">{job.message}</div>}
      <dl class="facts">
        {owner && (
          <><dt>owner</dt><dd><a href={`?actor=${encodeURIComponent(owner.id)}`} onClick={(e) => { e.preventDefault(); onSelect(owner.id); }}>{owner.name}</a> <code class="id">{owner.id}</code></dd></>
        )}
        {ex.kind === 'shell'
          ? <><dt>command</dt><dd><code data-testid="job-command">{ex.command}</code> <span class="muted">in {ex.cwd} · timeout {ex.timeoutSeconds} s</span></dd></>
          : <><dt>task</dt><dd data-testid="job-command">{ex.task} <span class="muted">· timeout {ex.timeoutSeconds} s</span></dd></>}
        <dt>phase</dt>
        <dd>{job.phase}{job.reason !== null ? <span class="muted"> · {job.reason.replace(/_/g, ' ')}</span> : null}
          {job.cancel && !ended ? <span class="muted"> · stop asked by {job.cancel.by}</span> : null}
          {queuePosition !== null ? <span data-testid="job-queue"> · queued, #{queuePosition} in line</span> : null}</dd>
        <dt>attempts</dt>
        <dd data-testid="job-attempts">{job.attempts} of {job.retries + 1}{job.idempotent ? '' : <span class="muted"> · not idempotent: not restarted</span>}</dd>
        {job.startedAt !== null && <><dt>started</dt><dd>{timeText(new Date(job.startedAt).toISOString())}{job.host ? <span class="muted"> on {job.host}</span> : null}</dd></>}
        {end && (
          <><dt>exit</dt><dd data-testid="job-exit">
            {end.exitCode !== null ? `exit code ${end.exitCode}` : end.signal !== null ? `killed by ${end.signal}` : 'no exit code'}
            <span class="muted"> · took {durationText(end.durationMs)}{end.output ? ` · output ${end.output.bytes.toLocaleString('en-US')} bytes (${end.output.id})` : ''}</span>
          </dd></>
        )}
      </dl>
      <h3>Output</h3>
      {end
        ? <pre class="job-tail" data-testid="job-tail">{end.tail === '' ? '(no output)' : end.tail}</pre>
        : liveOutput.state === 'open' || liveOutput.text !== ''
          ? <>
            <pre class="job-tail job-live" data-testid="job-live" data-live={liveOutput.state}>{liveOutput.text === '' ? '(no output yet)' : liveOutput.text}</pre>
            <p class="note muted">live, as its host publishes it (best effort): the tail its end records replaces it</p>
          </>
          : <p class="note" data-testid="job-output-note" data-live={liveOutput.state}>{ended ? 'no output recorded'
            : liveOutput.state === 'none' ? 'live output is not relayed by this gateway: the last lines show here once the job ends (its terminal event carries them)'
              : liveOutput.state === 'connecting' ? 'connecting to the live output…'
                : 'the output shows here while it runs, and its last lines once it ends'}</p>}
      <div class="buttons">
        <button class="cancel-job" disabled={!live || !CANCELLABLE.has(job.phase)} onClick={cancel}>Cancel</button>
        {!live && <span class="note">time travel: Cancel acts on now; press Live first</span>}
      </div>
      <div class={`said ${feedback?.tone ?? ''}`} data-testid="job-said">{feedback?.text ?? ''}</div>
    </section>
  );
}
