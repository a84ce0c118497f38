import type { DirectoryEntry } from '../../bus/directory.js';
import { publishInbox } from '../../bus/inbox.js';
import type { EffectiveConfig } from '../../config/config.js';
import { EventDescriber } from '../../client/event-text.js';
import { watchJobOutput } from '../../client/job-output.js';
import { durationText, exitText, jobPhaseText, jobView, type JobView } from '../../client/job-view.js';
import { interruptMessage } from '../../client/messages.js';
import { terminalText } from '../../client/terminal-text.js';
import { byteSize } from '../../client/tool-summary.js';
import type { ActorEvent } from '../../protocol/events.js';
import { isJobEnd } from '../../protocol/job-events.js';
import { createJobState, foldJobEvent, type JobState } from '../../store/job-projection.js';
import { EXIT } from '../exit-codes.js';
import { jobEntryOf, readJobLog } from '../job-reads.js';
import type { Out } from '../output.js';
import { createLogger, openRuntime, type Runtime } from '../runtime.js';
import { exitCodeForSignal, onStop, stopReceived } from '../stop-signals.js';

/** Options of `actorloop job`. */
export interface JobOptions {
  /** Ask the job to stop (an `interrupt` to its inbox on the person channel). */
  cancel?: boolean;
  /** Print its live output and phase moves until it ends. */
  follow?: boolean;
  json?: boolean;
}

/** A job's state folded from events, one at a time (the first `job/created` starts it). */
function fold(s: JobState | null, e: ActorEvent): JobState | null {
  if (s !== null) return foldJobEvent(s, e);
  return e.type === 'job/created' ? createJobState(e) : null;
}

/** The status lines of `job <id>`: what it runs, who owns it, where it is, how it ended. */
export function jobStatusLines(v: JobView): string[] {
  const rows: Array<[string, string]> = [];
  if (v.command !== null) rows.push([v.executor === 'subagent' ? 'task' : 'command', terminalText(v.command)]);
  if (v.cwd !== null) rows.push(['cwd', terminalText(v.cwd)]);
  rows.push(['owner', v.ownerId]);
  rows.push(['phase', `${jobPhaseText(v)}${v.reason !== null ? ` (${v.reason})` : ''}`]);
  if (v.message !== null) rows.push(['message', terminalText(v.message)]);
  rows.push(['attempts', `${v.attempts}${v.host !== null ? ` · last on ${terminalText(v.host)}` : ''}`]);
  if (v.phase !== null && isJobEnd(v.phase)) rows.push(['exit', exitText(v)]);
  if (v.durationMs !== null) rows.push(['duration', durationText(v.durationMs)]);
  if (v.output !== null) rows.push(['output', `${v.output.digest} · ${byteSize(v.output.bytes)}${v.output.binary ? ' · binary' : ''}`]);
  if (v.cancelRequested) rows.push(['cancel', 'requested']);
  if (v.phase !== null && isJobEnd(v.phase)) rows.push(['notified', v.notified ? 'yes' : 'not yet']);
  const width = Math.max(...rows.map(([k]) => k.length));
  return [`${v.jobId}  ${terminalText(v.name)}`, ...rows.map(([k, val]) => `  ${k.padEnd(width)}  ${val}`)];
}

/** The tail's lines, indented under a heading; none when it is empty. */
function tailLines(tail: string | null): string[] {
  if (tail === null || tail.trim() === '') return [];
  return ['output tail:', ...terminalText(tail.replace(/\n$/, ''), 'block').split('\n').map((l) => `  ${l}`)];
}

/**
 * `actorloop job <jobId> [--cancel] [--follow] [--json]`: a job's status from its own log (what
 * runs, its owner, its phase or place in the queue, attempts, exit, duration, its output's digest)
 * and its output's tail. `--cancel` asks it to stop: an `interrupt` to its inbox on the person
 * channel, which its host commits as `job/cancel_requested`. `--follow` prints its live output on
 * stdout and its phase moves on stderr until it ends, then the tail if no live output came; exit 0
 * when it completed (or, with `--cancel`, ended cancelled as asked), 1 otherwise.
 */
export async function jobCommand(jobId: string, opts: JobOptions, config: EffectiveConfig, out: Out): Promise<number> {
  // reading logs and a person's message: a client login is all it needs
  const rt = await openRuntime(config, createLogger(config), { role: 'client' });
  try {
    const entry = await jobEntryOf(rt, jobId);
    const events = await readJobLog(rt, entry.rootId, jobId);
    let state: JobState | null = null;
    for (const e of events) state = fold(state, e);
    const ended = state !== null && isJobEnd(state.phase);
    if (opts.cancel) {
      if (ended) {
        out.stderr.write(`${jobId} already ended ${state!.phase}: nothing to cancel\n`);
      } else {
        const msg = interruptMessage(jobId);
        await publishInbox(await rt.bus.person(), msg, 'person');
        if (opts.json && !opts.follow) out.stdout.write(`${JSON.stringify({ jobId, messageId: msg.id })}\n`);
        out.stderr.write(`cancel of ${jobId} sent (${msg.id})${opts.follow ? '; following it to its end' : ''}\n`);
      }
      if (!opts.follow) return EXIT.completed;
    }
    if (!opts.follow) {
      const v = jobView(state, entry, Date.now());
      out.stdout.write(opts.json ? `${JSON.stringify(v)}\n` : `${[...jobStatusLines(v), ...tailLines(v.tail)].join('\n')}\n`);
      return EXIT.completed;
    }
    const final = await followJob(rt, entry, events, state, opts.json === true, out);
    if (final === null) {
      const signal = stopReceived();
      return signal === null ? EXIT.interrupted : exitCodeForSignal(signal);
    }
    if (final.phase === 'completed' || (opts.cancel && final.phase === 'cancelled')) return EXIT.completed;
    return EXIT.failed;
  } finally {
    await rt.close();
  }
}

/**
 * Follows a job to its end: its live output on stdout as it comes, its phase moves (the events
 * after `events`) on stderr; then its tail if no live output came. `--json`: NDJSON on stdout, the
 * job's events and `{type: 'job/output', text}` chunks. The state it ended in, or null when the
 * person stopped it first (Ctrl-C, SIGTERM).
 */
async function followJob(
  rt: Runtime, entry: DirectoryEntry, events: ActorEvent[], from: JobState | null, json: boolean, out: Out,
): Promise<JobState | null> {
  let state = from;
  let liveText = false;
  // the watch first: output published while the log is read again is not missed
  const watch = watchJobOutput(rt.bus.nc, entry.rootId, entry.actorId, (text) => {
    liveText = true;
    out.stdout.write(json ? `${JSON.stringify({ type: 'job/output', text })}\n` : terminalText(text, 'block'));
  });
  const stop = new AbortController();
  const onSigint = (): void => stop.abort();
  process.once('SIGINT', onSigint);
  const offStop = onStop(() => stop.abort());
  const describer = new EventDescriber();
  for (const e of events) describer.note(e);
  const print = (e: ActorEvent): void => {
    if (json) out.stdout.write(`${JSON.stringify(e)}\n`);
    else out.stderr.write(`${describer.describe(e)}\n`);
  };
  try {
    await watch.ready;
    if (json) for (const e of events) print(e);
    else if (state !== null) out.stderr.write(`${entry.actorId} ${terminalText(state.name)}: ${jobPhaseText(jobView(state, entry, Date.now()))}\n`);
    if (state === null || !isJobEnd(state.phase)) {
      for await (const { event } of rt.reader.follow(entry.rootId, entry.actorId, { afterSeq: events.at(-1)?.seq ?? 0, signal: stop.signal })) {
        state = fold(state, event);
        print(event);
        if (state !== null && isJobEnd(state.phase)) break;
      }
    }
  } finally {
    watch.close();
    process.off('SIGINT', onSigint);
    offStop();
    stop.abort();
  }
  if (state === null || !isJobEnd(state.phase)) return null;
  // no live chunk came (it ended before the watch, or they were lost): the tail is the output, on
  // stdout as the chunks would have been
  const tail = state.end?.tail ?? '';
  if (!liveText && !json && tail.trim() !== '') out.stdout.write(terminalText(tail.endsWith('\n') ? tail : `${tail}\n`, 'block'));
  return state;
}
