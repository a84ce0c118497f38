import type { ActorEvent, EventData, EventType } from '../protocol/events.js';
import type { BlobRef } from '../protocol/history.js';
import { SubagentNoticeSchema } from '../protocol/subagents.js';
import { JobNoticeSchema } from '../protocol/job-events.js';
import type { LogReader } from './log-port.js';

// Which blobs a log needs (design §4): every digest an event names that was put to the blob
// store before the event was committed. `actorloop gc` keeps these and removes the rest, and a
// missing blob's error names the event found here. One entry per event type, so a new type
// cannot be added without saying what it names; test/store/blob-refs.test.ts walks every event
// schema for digest and ref fields, so a new field cannot either.

type Named = Array<string | undefined>;

const none = (): Named => [];
const ref = (r: BlobRef | undefined): string | undefined => r?.digest;

/**
 * A child's completion notice names the artifacts its parent's host stored (a worktree's diff); a
 * job's notice names its output.
 */
function noticeArtifacts(kind: string, content: string): Named {
  if (kind !== 'subagent_completed' && kind !== 'job_notice') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    return [];
  }
  if (kind === 'job_notice') {
    const j = JobNoticeSchema.safeParse(parsed);
    return j.success ? [j.data.output?.digest] : [];
  }
  const n = SubagentNoticeSchema.safeParse(parsed);
  return n.success ? n.data.artifacts.map((a) => a.digest) : [];
}

/** The blob digests each event type's data names. */
const NAMED: { [T in EventType]: (d: EventData<T>) => Named } = {
  'turn/start': none,
  'user/message': none,
  'turn/end': (d) => [ref(d.answerRef)],
  'step/start': none,
  // the prepared request as sent (stored whole or as a continuation of the step's last one)
  'request/prepared': (d) => [d.digest],
  'attempt/start': (d) => [d.requestDigest],
  'attempt/end': none,
  'assistant/accepted': (d) => [ref(d.contentRef), ...d.toolCalls.map((c) => ref(c.argumentsRef))],
  'assistant/rejected': (d) => [ref(d.contentRef)],
  'tool/call': (d) => [ref(d.argumentsRef)],
  // planDigest is the digest of a plan the event holds itself, never stored as a blob
  'policy/decided': none,
  'approval/requested': none,
  'approval/granted': none,
  'approval/denied': none,
  'tool/start': (d) => [ref(d.argumentsRef)],
  'tool/reconciled': none,
  'tool/result': (d) => [d.artifact?.digest, ref(d.outputRef)],
  'tool/denied': none,
  'budget/reserved': none,
  'budget/settled': none,
  'stop/decided': none,
  'tool/cancelled': none,
  'tool/outcome_unknown': none,
  'step/end': none,
  'inbox/received': (d) => [ref(d.contentRef), ...noticeArtifacts(d.kind, d.content)],
  'inbox/cancelled': none,
  'recovery/started': none,
  'recovery/continuation': none,
  'actor/rehydrated': none,
  'actor/killed': none,
  'actor/released': none,
  'actor/stopped': none,
  'interrupt/requested': none,
  'ask/asked': none,
  'ask/answered': (d) => [ref(d.answerRef)],
  'plan/replaced': none,
  'completion/rejected': none,
  'goal/created': none,
  'goal/updated': none,
  'actor/parked': none,
  'subagent/spawn_requested': none,
  'subagent/spawned': none,
  'subagent/message_sent': none,
  'subagent/reported': none,
  'subagent/completed': none,
  'subagent/notified': none,
  'subagent/waiting': none,
  'subagent/detached': none,
  // the texts the model was given of docs, the skill index and memory (a request is rebuilt from them)
  'doc/loaded': (d) => [d.textRef.digest],
  'skills/indexed': (d) => [d.textRef.digest],
  'skill/loaded': none,
  'memory/loaded': (d) => [d.textRef.digest],
  'memory/changed': none,
  'retrieval/loaded': (d) => [d.textRef.digest],
  'compaction/started': none,
  // the checkpoint's text is in the event itself
  'checkpoint/committed': none,
  'compaction/rejected': none,
  'job/created': none,
  'job/started': none,
  // a terminal phase names the job's output, stored before the phase is committed
  'job/phase': (d) => [d.end?.output?.digest],
  'job/cancel_requested': none,
  'job/notified': none,
  // a node's result names its job's output, which the job's own log names too
  'workflow/created': none,
  'node/started': none,
  'node/ended': none,
  'workflow/cancel_requested': none,
  'workflow/ended': none,
};

/** Every blob digest an event names (each once, in the order the event names them). */
export function blobRefs(event: ActorEvent): string[] {
  const named = (NAMED[event.type] as (d: unknown) => Named)(event.data);
  const out: string[] = [];
  for (const d of named) if (d !== undefined && d !== '' && !out.includes(d)) out.push(d);
  return out;
}


/**
 * The first event of one actor's log that names `digest`, read from the start: what a missing
 * blob's error points at. Null when no event of that log names it.
 */
export async function firstNaming(
  reader: Pick<LogReader, 'read'>, rootId: string, actorId: string, digest: string,
): Promise<{ actorId: string; type: EventType; seq: number } | null> {
  for await (const { event } of reader.read(rootId, actorId)) {
    if (blobRefs(event).includes(digest)) return { actorId, type: event.type, seq: event.seq };
  }
  return null;
}
