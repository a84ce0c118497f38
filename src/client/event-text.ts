import { assertNever } from '../protocol/errors.js';
import type { ActorEvent, EventData } from '../protocol/events.js';
import type { Usage } from '../protocol/history.js';
import { incarnationOf, noteEpochs } from '../store/incarnations.js';
import { terminalText } from '../client/terminal-text.js';
import { byteSize, callSummary, clip, resultBrief } from '../client/tool-summary.js';

/** One event as one NDJSON line (`--json`: the exact event, raw epoch and all). */
export function eventLine(e: ActorEvent): string {
  return `${JSON.stringify(e)}\n`;
}

/** `sha256:1a2b3c4d5e6f`: enough of a digest to tell two apart and find one. */
export function shortDigest(digest: string): string {
  const at = digest.indexOf(':');
  return at < 0 ? digest.slice(0, 12) : `${digest.slice(0, at)}:${digest.slice(at + 1, at + 13)}`;
}

/** `1,234+56 tok` (`~` when counted, not reported). */
export function tokenText(u: Usage): string {
  return `${u.estimated ? '~' : ''}${u.inputTokens.toLocaleString('en-US')}+${u.outputTokens.toLocaleString('en-US')} tok`;
}

/** `1 step`, `2 steps`: a count with its noun in the number it takes. */
export function counted(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** `$0.0042`, or `cost unknown` for a model with no known price (unknown is never 0). */
export function costText(usd: number | null | undefined): string {
  return usd === null || usd === undefined ? 'cost unknown' : `$${usd.toFixed(4)}`;
}

/** The incarnation an epoch was, in words: `incarnation 2`, or the raw epoch when the log never showed it. */
export function incarnationText(epochs: readonly number[], epoch: number): string {
  const n = incarnationOf(epochs, epoch);
  return n === null ? `epoch ${epoch}` : `incarnation ${n}`;
}

/** What an `actor/killed` says, in words: which incarnation, where its log stopped, what killed it. */
export function killedText(d: EventData<'actor/killed'>, epochs: readonly number[]): string {
  return `${incarnationText(epochs, d.epoch)} died after seq ${d.lastSeq} · ${d.point === null ? 'point not known' : `at ${d.point}`} · ${d.detectedBy}`;
}

/** How a question ended, in words; a sensitive answer shows as `[sensitive]` (the log holds nothing else). */
export function answeredText(d: EventData<'ask/answered'>): string {
  if (d.outcome !== 'answered') return d.outcome;
  return `answered · ${d.optionId !== null ? `option ${d.optionId}` : clip(d.answer, 60)}`;
}

const reasonText = (reason: string | null | undefined, max = 60): string => (reason ? ` (${clip(reason, max)})` : '');

/**
 * Describes an agent's events one line each, for `events` and wherever a log is shown to people.
 * It reads them in order (from seq 1: give it the earlier ones with `note` when printing from a
 * later one), so it can say what a bare event cannot: the incarnation an epoch was (1, 2, 3…,
 * not a lease revision), the model of the step an attempt belongs to.
 */
export class EventDescriber {
  private readonly epochs: number[] = [];
  private stepModel: string | null = null;

  /** Takes an event in without describing it (one before the first to print). */
  note(e: ActorEvent): void {
    noteEpochs(this.epochs, e);
    if (e.type === 'step/start') this.stepModel = e.data.model;
  }

  /**
   * A one-line, human summary of the event: seq, time, type and its key fields. Incarnations are
   * named where one begins or ends (`actor/killed`, `actor/rehydrated`, `actor/released`): there
   * the log has shown every earlier one (an incarnation that died writing nothing is first named by
   * the `actor/killed` of the next), so a number once shown never changes. The
   * data it quotes (file contents, model output, arguments) has its control characters shown, not sent.
   */
  describe(e: ActorEvent): string {
    this.note(e);
    const head = `${String(e.seq).padStart(5)}  ${e.at.slice(11, 23)}  ${e.type.padEnd(22)}`;
    const fields = this.fields(e);
    return terminalText(fields === '' ? head.trimEnd() : `${head} ${fields}`);
  }

  /** The key fields of the event alone (no seq, time or type), with its text as it came: a terminal caller escapes it (`describe`), a page shows it as text. */
  fields(e: ActorEvent): string {
    switch (e.type) {
      case 'turn/start': {
        const s = e.data.settings;
        const b = s.budgets;
        const budgets = [
          b.maxSteps !== null ? `max ${b.maxSteps} steps` : '',
          b.maxToolCalls !== null ? `max ${b.maxToolCalls} tool calls` : '',
          b.deadlineAt !== null ? `deadline ${new Date(b.deadlineAt).toISOString()}` : '',
        ].filter(Boolean);
        return [`${e.data.source} · model ${s.model} · ${s.approvalMode ?? 'ask'}`, s.planMode ? 'plan mode' : '', ...budgets].filter(Boolean).join(' · ');
      }
      case 'user/message':
        return `${e.data.messageId} ${clip(e.data.content)}`;
      case 'turn/end':
        return `${e.data.outcome}${reasonText(e.data.reason)} · ${counted(e.data.steps, 'step')} · ${counted(e.data.toolCalls, 'tool call')} · ${tokenText(e.data.usage)} · ${costText(e.data.costUsd)}`;
      case 'step/start':
        return `step ${e.data.index} · model ${e.data.model}${e.data.effort ? ` · effort ${e.data.effort}` : ''}${e.data.messageIds?.length ? ` · claims ${e.data.messageIds.join(', ')}` : ''}`;
      case 'request/prepared':
        return `${byteSize(e.data.bytes)} · ${e.data.messages} messages · ${shortDigest(e.data.digest)}${e.data.budget ? ` · ${e.data.budget.estimated ? '~' : ''}${e.data.budget.tokens} tokens${e.data.budget.window ? ` of ${e.data.budget.window}` : ''}` : ''}${e.data.messageIds?.length ? ` · includes ${e.data.messageIds.join(', ')}` : ''}`;
      case 'attempt/start':
        return `${e.data.kind === 'compaction' ? 'compaction summary' : `attempt ${e.data.index}`}${this.stepModel ? ` · ${this.stepModel}` : ''} · request ${shortDigest(e.data.requestDigest)}`;
      case 'attempt/end': {
        const d = e.data;
        const error = d.error ? ` (${d.error.class}: ${clip(d.error.message, 60)})` : '';
        const latency = d.latencyMs !== null ? ` · ${d.latencyMs} ms` : '';
        const backoff = d.backoffMs !== null ? ` · retry in ${d.backoffMs} ms` : '';
        return `${d.outcome}${error} · ${tokenText(d.usage)} · ${costText(d.costUsd)}${latency}${backoff}`;
      }
      case 'assistant/accepted': {
        const d = e.data;
        const calls = d.toolCalls.length > 0 ? ` · ${d.toolCalls.map((c) => c.name).join(', ')}` : '';
        const text = d.content ? ` · ${clip(d.content, 60)}` : '';
        return `${d.finishReason}${calls}${text}`;
      }
      case 'assistant/rejected':
        return clip(e.data.reason);
      case 'tool/call': {
        const d = e.data;
        const status = d.status === 'valid' ? '' : ` → ${d.status}${d.error ? ` (${clip(d.error, 60)})` : ''}`;
        return `${callSummary(d.name, d.arguments)}${status}${d.effects === 'possible' ? ' · effects possible' : ''}`;
      }
      case 'policy/decided': {
        const d = e.data;
        const grants = [d.network ? 'network' : '', d.envAllow?.length ? `env ${d.envAllow.join(',')}` : ''].filter(Boolean);
        return `${d.decision} · ${d.rule}${reasonText(d.reason)}${d.recheck ? ' · recheck' : ''}${grants.length ? ` · grants ${grants.join(', ')}` : ''}`;
      }
      case 'approval/requested': {
        const d = e.data;
        return `${d.approvalId} ${d.tool} v${d.toolVersion} · plan ${shortDigest(d.planDigest)} · expires ${new Date(d.expiresAt).toISOString()}${d.rule ? ` · rule ${d.rule}` : ''}`;
      }
      case 'approval/granted':
        return `${e.data.approvalId} by ${e.data.by}${e.data.always ? ' · always' : ''}`;
      case 'approval/denied':
        return `${e.data.approvalId} by ${e.data.by}${reasonText(e.data.reason)}`;
      case 'tool/start':
        return `${e.data.name}${e.data.rerun ? ' (run again)' : ''} · effects ${e.data.effects}`;
      case 'tool/reconciled':
        return `${e.data.verdict.replace('_', ' ')}${reasonText(e.data.reason)} · ${e.data.durationMs} ms`;
      case 'tool/result': {
        const brief = resultBrief(e.data, 1);
        return `${brief.head} · ${e.data.durationMs} ms${brief.lines[0] ? ` · ${clip(brief.lines[0], 60)}` : ''}`;
      }
      case 'tool/denied':
      case 'tool/outcome_unknown':
        return clip(e.data.reason);
      case 'tool/cancelled':
        return `${clip(e.data.reason)}${e.data.started ? ' · had started' : ''}${e.data.started && e.data.confirmed === false ? ' · not confirmed stopped' : ''}`;
      case 'step/end': {
        const d = e.data;
        return `${d.outcome}${reasonText(d.reason)} · ${counted(d.toolCalls, 'tool call')}${d.usage ? ` · ${tokenText(d.usage)}` : ''}${d.costUsd !== undefined ? ` · ${costText(d.costUsd)}` : ''}`;
      }
      // the kind and ID only: a message's content may be an answer a person marked sensitive
      case 'inbox/received':
        return `${e.data.kind} ${e.data.messageId} from ${e.data.from}`;
      case 'inbox/cancelled':
        return `${e.data.kind ? `${e.data.kind} ` : ''}${e.data.messageId} (${clip(e.data.reason, 60)})`;
      case 'recovery/started':
        return `from seq ${e.data.fromSeq} · ${clip(e.data.reason, 60)}${e.data.requeued?.length ? ` · requeued ${e.data.requeued.join(', ')}` : ''}`;
      case 'recovery/continuation':
        return `closed: ${e.data.closed.join('; ') || 'nothing'} · resume ${e.data.resume}`;
      case 'actor/rehydrated':
        return `${incarnationText(this.epochs, e.epoch)} · snapshot at seq ${e.data.snapshotSeq} + ${e.data.tailEvents} events`;
      case 'actor/killed':
        return killedText(e.data, this.epochs);
      case 'actor/released':
        return `${incarnationText(this.epochs, e.epoch)} · ${clip(e.data.reason)}`;
      case 'actor/stopped':
        return clip(e.data.reason);
      case 'interrupt/requested':
        return `by ${e.data.by} · follow-ups ${e.data.followUps}`;
      case 'ask/asked': {
        const d = e.data;
        const options = d.options.length > 0 ? ` · options ${d.options.map((o) => o.id).join('|')}` : '';
        return `${d.questionId} ${clip(d.question, 60)}${options}${d.sensitive ? ' · sensitive' : ''} · expires ${new Date(d.expiresAt).toISOString()}`;
      }
      case 'ask/answered':
        return `${e.data.questionId} ${answeredText(e.data)}${e.data.messageId ? ` · by ${e.data.by}` : ''}`;
      case 'plan/replaced':
        return `version ${e.data.version} · ${e.data.items.filter((i) => i.status === 'completed').length}/${e.data.items.length} done`;
      case 'completion/rejected':
        return `${e.data.policy} · missing ${clip(e.data.missing.join('; '))}`;
      case 'actor/parked':
        return `waiting for ${e.data.waitingFor} ${e.data.ids.join(', ')}`;
      case 'budget/reserved': {
        const d = e.data;
        const what = d.kind === 'attempt' ? `${d.tokens} tokens${d.costUsd !== null ? ` · $${d.costUsd}` : ''}` : counted(d.calls ?? 0, 'tool call');
        return `${d.scope} ${d.kind} · ${what}`;
      }
      case 'budget/settled': {
        const d = e.data;
        return `${d.outcome} · ${d.calls !== undefined ? counted(d.calls, 'tool call') : `${d.tokens} tokens${d.costUsd !== null ? ` · $${d.costUsd}` : ''}`}`;
      }
      case 'stop/decided':
        return `${clip(e.data.reason)} · by ${e.data.via}`;
      case 'goal/created':
        return `${e.data.goalId} ${clip(e.data.objective, 60)}`;
      case 'goal/updated': {
        const d = e.data;
        const what = d.requested === 'complete' ? 'completion requested' : d.phase;
        return `${d.goalId} r${d.revision} ${what}${reasonText(d.reason)} · by ${d.by}`;
      }
      case 'subagent/spawn_requested': {
        const d = e.data;
        return `${d.childId} "${d.name}" ${d.mode} · ${d.context} · ${d.permissions.workspaceMode}${d.permissions.readOnly ? ' read-only' : ''} · ${d.permissions.tools.length} tools · ${clip(d.task, 60)}`;
      }
      case 'subagent/spawned':
        return `${e.data.childId} · task ${e.data.messageId}${e.data.worktree ? ` · worktree ${e.data.worktree}` : ''}`;
      case 'subagent/message_sent':
        return `${e.data.kind} to ${e.data.childId} · ${e.data.messageId}${e.data.reason ? ` · ${clip(e.data.reason, 60)}` : ''}`;
      case 'subagent/reported':
        return `to ${e.data.parentId} · ${e.data.messageId}`;
      case 'subagent/completed':
        return `${e.data.childId} ${e.data.kind === 'subagent_report' ? 'report' : (e.data.outcome ?? 'ended')} taken by the waiting call · ${e.data.messageId}`;
      case 'subagent/notified':
        return `${e.data.outcome} notice to ${e.data.parentId} · ${e.data.messageId}`;
      case 'subagent/waiting':
        return `${e.data.any ? 'any of' : 'the end of'} ${e.data.childIds.join(', ') || '(none)'}${e.data.deadlineAt !== null ? ` · until ${new Date(e.data.deadlineAt).toISOString()}` : ''}`;
      case 'subagent/detached':
        return `${e.data.childId} · ${clip(e.data.reason, 60)}`;
      case 'doc/loaded':
        return `${e.data.path} · ${e.data.scope} · ${byteSize(e.data.bytes)}${e.data.truncated ? ' (cut)' : ''} · ${e.data.placement === 'after_call' ? 'after a call' : 'in the instructions'} · ${shortDigest(e.data.digest)}`;
      case 'skills/indexed':
        return e.data.skills.length === 0 ? 'no skills' : `${counted(e.data.skills.length, 'skill')}: ${clip(e.data.skills.map((s) => s.name).join(', '), 80)}`;
      case 'skill/loaded':
        return `${e.data.name} · ${e.data.path} · ${byteSize(e.data.bytes)} · ${shortDigest(e.data.digest)}`;
      case 'memory/loaded':
        return `${e.data.file === 'user' ? 'USER.md' : 'MEMORY.md'} · ${byteSize(e.data.bytes)}${e.data.summarized ? ' · index only (past its budget)' : ''} · ${shortDigest(e.data.digest)}`;
      case 'retrieval/loaded':
        return `${counted(e.data.excerpts.length, 'excerpt')} by ${e.data.retriever} for "${clip(e.data.query, 50)}" · ${shortDigest(e.data.textRef.digest)}`;
      case 'memory/changed':
        return `${e.data.file === 'user' ? 'USER.md' : 'MEMORY.md'} ${e.data.action} · ${shortDigest(e.data.before)} → ${shortDigest(e.data.digest)}`;
      case 'compaction/started':
        return `${e.data.checkpoint} · items ${e.data.range.from}-${e.data.range.to - 1} · ${e.data.trigger} · ${e.data.tokensBefore} tokens · history r${e.data.historyRevision} · request r${e.data.requestRevision}`;
      case 'checkpoint/committed':
        return `${e.data.id} · items ${e.data.range.from}-${e.data.range.to - 1} · ${e.data.tokensBefore} → ${e.data.tokensAfter} tokens · kept ${clip(e.data.kept.join(', '), 120)}`;
      case 'compaction/rejected':
        return `${e.data.checkpoint} ${e.data.reason} · ${clip(e.data.message, 100)}`;
      case 'job/created': {
        const d = e.data;
        const run = d.executor.kind === 'shell' ? `$ ${clip(d.executor.command, 80)}` : `subagent · ${clip(d.executor.task, 60)}`;
        return `${d.jobId} "${d.name}" · ${run} · timeout ${d.executor.timeoutSeconds}s${d.idempotent ? ` · idempotent, ${d.retries} ${d.retries === 1 ? 'retry' : 'retries'}` : ''} · owner ${d.ownerId} · on owner end ${d.onOwnerEnd}`;
      }
      case 'job/started':
        return `attempt ${e.data.attempt} on ${e.data.host}${e.data.deadlineAt !== null ? ` · until ${new Date(e.data.deadlineAt).toISOString()}` : ''}`;
      case 'job/phase': {
        const d = e.data;
        const end = d.end === null ? '' : ` · ${d.end.exitCode !== null ? `exit ${d.end.exitCode}` : (d.end.signal ?? 'no exit code')} · ${d.end.durationMs} ms${d.end.usage ? ` · ${tokenText(d.end.usage)}` : ''}${d.end.output ? ` · output ${byteSize(d.end.output.bytes)} ${shortDigest(d.end.output.digest)}` : ''}`;
        return `${d.from} → ${d.phase} (${d.reason})${d.message ? ` · ${clip(d.message, 80)}` : ''}${end}`;
      }
      case 'job/cancel_requested':
        return `${e.data.reason} · by ${e.data.by}${e.data.messageId ? ` · ${e.data.messageId}` : ''}`;
      case 'job/notified':
        return `${e.data.phase} notice to ${e.data.ownerId} · ${e.data.messageId}`;
      case 'workflow/created':
        return `${e.data.runId} "${e.data.name}" · ${e.data.workflow.nodes.length} nodes · cwd ${clip(e.data.cwd, 60)}${e.data.ownerId ? ` · owner ${e.data.ownerId}` : ''}`;
      case 'node/started':
        return `${e.data.node} attempt ${e.data.attempt} · ${e.data.jobId}`;
      case 'node/ended':
        return `${e.data.node} attempt ${e.data.attempt} ${e.data.outcome}${e.data.error ? ` · ${clip(e.data.error, 80)}` : ''}`;
      case 'workflow/cancel_requested':
        return `by ${e.data.by} · ${e.data.messageId}`;
      case 'workflow/ended':
        return `${e.data.outcome}${e.data.failed.length > 0 ? ` · failed ${e.data.failed.join(', ')}` : ''}`;
      default:
        return assertNever(e, 'event type');
    }
  }
}

/**
 * One event in one line (see `EventDescriber`); alone, without the log before it, so its
 * incarnation is counted from this event. Use an `EventDescriber` for a log.
 */
export function describeEvent(e: ActorEvent): string {
  return new EventDescriber().describe(e);
}
