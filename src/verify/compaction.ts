import type { Check, Report } from './violations.js';

// Compaction's invariants (design §10) as one log shows them: a checkpoint is committed only for
// the compaction that was started, once, while the history revision it was made from still held
// (the CAS), and it names every required item it claims to keep.

/** Rejections made before any compaction started (a step that could not compact at all). */
const COULD_NOT_START: ReadonlySet<string> = new Set(['nothing_to_compact', 'fixed_too_large', 'revision_limit', 'conflict']);

/**
 * Folds the history revision as the projection does (`compaction-projection.ts`): one more with
 * each user message, closed step, checkpoint, and steer or inject received.
 */
export function createCompactionCheck(report: Report): Check {
  let revision = 0;
  const open = new Map<string, { seq: number; historyRevision: number; from: number; to: number; step: string | undefined }>();
  const closed = new Map<string, number>();
  const close = (id: string, seq: number, what: string): ReturnType<typeof open.get> => {
    const c = open.get(id);
    if (c === undefined) {
      const first = closed.get(id);
      if (first !== undefined) report('compaction.closed_twice', seq, `${what} of compaction ${id}, already closed at seq ${first}`);
      else report('compaction.unstarted', seq, `${what} of compaction ${id}, which was never started`);
      return undefined;
    }
    open.delete(id);
    closed.set(id, seq);
    return c;
  };
  return {
    event(e) {
      switch (e.type) {
        case 'inbox/received':
          if (e.data.kind === 'steer' || e.data.kind === 'inject') revision += 1;
          return;
        case 'user/message':
        case 'step/end':
          revision += 1;
          if (e.type === 'step/end') {
            for (const [id, c] of open) {
              if (c.step !== e.step) continue;
              report('compaction.open_at_step_end', e.seq, `step ${e.step} ended with compaction ${id} (started at seq ${c.seq}) neither committed nor rejected`);
              open.delete(id);
            }
          }
          return;
        case 'compaction/started':
          for (const [id, c] of open) if (c.step === e.step) report('compaction.nested', e.seq, `compaction ${e.data.checkpoint} starts while ${id} (seq ${c.seq}) is open`);
          if (e.data.historyRevision !== revision) {
            report('compaction.cas', e.seq, `compaction ${e.data.checkpoint} starts from history revision ${e.data.historyRevision}, but the log is at ${revision}`);
          }
          open.set(e.data.checkpoint, { seq: e.seq, historyRevision: e.data.historyRevision, from: e.data.range.from, to: e.data.range.to, step: e.step });
          return;
        case 'compaction/rejected':
          // a compaction that could not start is rejected without a start
          if (COULD_NOT_START.has(e.data.reason) && !open.has(e.data.checkpoint) && !closed.has(e.data.checkpoint)) closed.set(e.data.checkpoint, e.seq);
          else close(e.data.checkpoint, e.seq, 'compaction/rejected');
          return;
        case 'checkpoint/committed': {
          const c = close(e.data.id, e.seq, 'checkpoint/committed');
          if (c !== undefined && (c.from !== e.data.range.from || c.to !== e.data.range.to || c.historyRevision !== e.data.historyRevision)) {
            report('compaction.mismatch', e.seq, `checkpoint ${e.data.id} replaces ${e.data.range.from}-${e.data.range.to} from revision ${e.data.historyRevision}; it was started for ${c.from}-${c.to} from revision ${c.historyRevision}`);
          }
          // the CAS: committed only while the revision it was made from holds
          if (e.data.historyRevision !== revision) {
            report('compaction.cas', e.seq, `checkpoint ${e.data.id} was made from history revision ${e.data.historyRevision} and committed at revision ${revision}: the history changed under it`);
          }
          const lines = new Set(e.data.text.split('\n'));
          const missing: string[] = [];
          if (!e.data.kept.includes('task')) missing.push('task');
          if (!e.data.kept.includes('permissions')) missing.push('permissions');
          // every file changed is kept by name, or (past the checkpoint's line limit) counted on one line
          const named = e.data.files.filter((f) => e.data.kept.includes(`file ${f.path}`));
          if (named.length < e.data.files.length && !e.data.kept.includes('older files')) {
            for (const f of e.data.files) if (!named.includes(f)) missing.push(`file ${f.path}`);
          }
          for (const f of named) {
            if (!lines.has(`Changed: ${f.path}${f.digest ? ` (${f.digest})` : ''}`)) missing.push(`the line of file ${f.path}`);
          }
          if (![...lines].some((l) => l.startsWith("Task (the user's words): "))) missing.push("the task's line");
          if (missing.length > 0) report('compaction.missing_pins', e.seq, `checkpoint ${e.data.id} does not keep: ${missing.join(', ')}`);
          revision += 1;
          return;
        }
        default:
          return;
      }
    },
    // a compaction open when the log ends is inside an open step, which the scope check reports
    end() {},
  };
}
