import { sha256Digest } from '../protocol/canonical-json.js';
import type { HistoryItem } from '../protocol/history.js';
import { wrapUntrusted } from './assembly.js';

// The pure core of compaction (design §10): which closed steps a checkpoint may replace, what it
// must keep, the text it is sent as, and the check that a candidate kept every required item.
// The runtime (the compaction attempt, its events, the history CAS) builds on these.

/** What a checkpoint must keep, whatever the summary says: each item is checked before it is committed. */
export interface PinnedFacts {
  /** The user's original words: the task of the session (its first user message). */
  task: string;
  goal: { objective: string; phase: string; revision: number } | null;
  /** What the user said after the task (steers, follow-ups, answers), verbatim, oldest first. */
  corrections: string[];
  /** Files changed, with the digest of their content after the change where known. */
  filesChanged: Array<{ path: string; digest: string | null }>;
  /** Verifications run (the commands and whether they passed). */
  verifications: Array<{ command: string; ok: boolean }>;
  /** The current plan, as the model reads it; null: none. */
  plan: string | null;
  openApprovals: string[];
  openQuestions: string[];
  /** Calls whose outcome is unknown: they may or may not have taken effect. */
  outcomeUnknown: Array<{ callId: string; tool: string; reason: string }>;
  /** Running subagents and jobs, by ID. */
  running: Array<{ id: string; name: string }>;
  /** What the agent may do: its run mode, whether it is read-only, its tools. */
  permissions: { approvalMode: string; readOnly: boolean; tools: string[] };
  /** The latest failed tool result, its text kept (on one line); absent or null: none failed. */
  latestError?: { tool: string; callId: string; text: string } | null;
}

/** A range of the closed history a checkpoint may replace: items `[from, to)`, whole steps only. */
export interface CompactionRange {
  from: number;
  to: number;
}

/** True when `i` is a step boundary of `history`: no tool result of an earlier call starts there. */
function boundary(history: readonly HistoryItem[], i: number): boolean {
  return i >= history.length || history[i]!.role !== 'tool';
}

/**
 * The range of closed steps to compact: after the session's first user message (the task stays
 * verbatim) and before the newest `keepSteps` steps (an assistant answer with its tool results is
 * one step; a step and its results are never split). Null when nothing closed is left to compact.
 */
export function compactionRange(history: readonly HistoryItem[], keepSteps: number): CompactionRange | null {
  const first = history.findIndex((h) => h.role === 'user');
  let from = first + 1;
  // a checkpoint already at the head (a user item the runtime wrote) is compacted again with the rest
  while (from < history.length && !boundary(history, from)) from++;
  // the starts of assistant steps, newest last
  const starts: number[] = [];
  for (let i = from; i < history.length; i++) if (history[i]!.role === 'assistant') starts.push(i);
  if (starts.length <= keepSteps) return null;
  let to = starts[starts.length - keepSteps] ?? history.length;
  if (keepSteps === 0) to = history.length;
  while (to > from && !boundary(history, to)) to--;
  return to > from ? { from, to } : null;
}

/**
 * The most lines one kind of fact takes in a checkpoint (the newest are kept; a line says how many
 * older ones the log holds): a session that wrote ten thousand files must still fit its window.
 */
export const PINNED_LINES_MAX = 100;

/** The newest `PINNED_LINES_MAX` of `xs`, and how many older ones were left out. */
function newest<T>(xs: readonly T[]): { kept: readonly T[]; left: number } {
  return xs.length <= PINNED_LINES_MAX ? { kept: xs, left: 0 } : { kept: xs.slice(xs.length - PINNED_LINES_MAX), left: xs.length - PINNED_LINES_MAX };
}

/** One line a required item is kept as: the check looks for these lines verbatim. */
export function pinnedLines(p: PinnedFacts): Array<{ item: string; line: string }> {
  const out: Array<{ item: string; line: string }> = [];
  const one = (s: string) => s.replace(/\s+/g, ' ').trim();
  out.push({ item: 'task', line: `Task (the user's words): ${one(p.task)}` });
  if (p.goal) out.push({ item: 'goal', line: `Goal r${p.goal.revision} (${p.goal.phase}): ${one(p.goal.objective)}` });
  const said = newest(p.corrections);
  if (said.left > 0) out.push({ item: 'older corrections', line: `User, earlier: ${said.left} more messages (in the log)` });
  said.kept.forEach((c, i) => out.push({ item: `correction ${said.left + i + 1}`, line: `User, later: ${one(c)}` }));
  const files = newest(p.filesChanged);
  if (files.left > 0) out.push({ item: 'older files', line: `Changed: ${files.left} more files (named in the log's checkpoint/committed)` });
  for (const f of files.kept) out.push({ item: `file ${f.path}`, line: `Changed: ${f.path}${f.digest ? ` (${f.digest})` : ''}` });
  const checks = newest(p.verifications);
  if (checks.left > 0) out.push({ item: 'older verifications', line: `Verified: ${checks.left} more commands (in the log)` });
  for (const v of checks.kept) out.push({ item: `verification ${v.command}`, line: `Verified: ${one(v.command)} ${v.ok ? 'passed' : 'FAILED'}` });
  if (p.plan) out.push({ item: 'plan', line: `Plan: ${one(p.plan)}` });
  for (const a of p.openApprovals) out.push({ item: `approval ${a}`, line: `Waiting for approval: ${a}` });
  for (const q of p.openQuestions) out.push({ item: `question ${q}`, line: `Waiting for an answer: ${q}` });
  for (const u of p.outcomeUnknown) out.push({ item: `unknown ${u.callId}`, line: `Outcome unknown (may or may not have taken effect): ${u.tool} ${u.callId}: ${one(u.reason)}` });
  for (const r of p.running) out.push({ item: `running ${r.id}`, line: `Running: ${r.name} ${r.id}` });
  if (p.latestError) out.push({ item: 'latest error', line: `Latest error: ${p.latestError.tool} ${p.latestError.callId}: ${one(p.latestError.text)}` });
  out.push({ item: 'permissions', line: `Permissions: mode ${p.permissions.approvalMode}${p.permissions.readOnly ? ', read-only' : ''}; tools ${p.permissions.tools.join(', ')}` });
  return out;
}

/** The line after which a checkpoint's text holds the model's summary. */
export const SUMMARY_HEADING = 'Summary of the compacted steps:';

/**
 * The checkpoint as the model reads it: every required item on a line of its own, then what the
 * compacted steps came to (the summary). The summary is a model's reading of tool output, so it is
 * data, not instructions: wrapped as untrusted (a line in it that looks like a pinned fact is still
 * inside the data tag). Deterministic for the same input.
 */
export function checkpointText(summary: string, pins: PinnedFacts, range: CompactionRange): string {
  return [
    `Checkpoint: items ${range.from}-${range.to - 1} of this conversation were compacted into this summary. The facts below are exact; the summary is the model's.`,
    '',
    ...pinnedLines(pins).map((p) => p.line),
    '',
    SUMMARY_HEADING,
    wrapUntrusted('compaction summary', summary.trim() === '' ? '(empty)' : summary.trim()),
  ].join('\n');
}

/** The required items a checkpoint's text does not hold verbatim: a candidate missing any is not committed. */
export function missingPins(text: string, pins: PinnedFacts): string[] {
  const lines = new Set(text.split('\n'));
  return pinnedLines(pins).filter((p) => !lines.has(p.line)).map((p) => p.item);
}

/** A checkpoint candidate: the history it makes, what it replaces, its digest and what it kept. */
export interface CheckpointCandidate {
  range: CompactionRange;
  text: string;
  digest: string;
  kept: string[];
  history: HistoryItem[];
}

/** The history with `range` replaced by the checkpoint (a user item the model reads first in its place). */
export function applyCheckpoint(history: readonly HistoryItem[], range: CompactionRange, summary: string, pins: PinnedFacts): CheckpointCandidate {
  const text = checkpointText(summary, pins, range);
  return {
    range,
    text,
    digest: sha256Digest(text),
    kept: pinnedLines(pins).map((p) => p.item),
    history: [...history.slice(0, range.from), { role: 'user', content: text }, ...history.slice(range.to)],
  };
}

/**
 * Whether a candidate saves enough to be committed: at least `minGain` tokens fewer than the
 * history it replaces. Below it the step ends `context_cannot_fit` (no progress).
 */
export function enoughGain(tokensBefore: number, tokensAfter: number, minGain: number): boolean {
  return tokensBefore - tokensAfter >= minGain;
}
