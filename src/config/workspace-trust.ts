import { DEFAULT_SUBAGENT_LIMITS } from '../protocol/subagents.js';
import { DEFAULT_JOB_LIMITS } from '../protocol/job-events.js';
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ApprovalMode } from '../protocol/events.js';
import { stricterMode } from '../protocol/turn-settings.js';
import type { PolicyRule } from '../protocol/policy-rule.js';
import type { ConfigFile } from './config-file.js';

// A workspace's actorloop.toml comes with the repository, so whoever wrote the repository wrote
// it (design §11a). Until the user trusts the workspace (`actorloop trust <dir>`, recorded in the
// user's file), it may only tighten: these rules say which of its keys count and how.

// the order of run modes lives with their schema, where the tree's checks (src/actors) read it too
export { stricterMode } from '../protocol/turn-settings.js';

/** The default run mode of runs that pass no `--approve` and whose files set none. */
export const DEFAULT_APPROVAL_MODE: ApprovalMode = 'ask';
/** The default life of an approval request. */
export const DEFAULT_APPROVAL_TTL_SECONDS = 24 * 60 * 60;
/** How long a question waits for a person unless configured: a day, as an approval does. */
export const DEFAULT_ASK_TTL_SECONDS = 24 * 60 * 60;

/**
 * Keys a workspace file never sets until the user trusts it: they would send the user's secrets or
 * data elsewhere, or (replicas) rescale the streams of the deployment the user points at.
 */
const NEVER_UNTRUSTED = ['base_url', 'api_key_env', 'nats_url', 'nats_creds', 'data_dir', 'replicas'] as const;
/** Keys only the user's own file may set, trusted workspace or not. */
const USER_ONLY = ['trust_workspace_policy', 'workspaces'] as const;

/** A workspace's path as trust records it: absolute, symlinks resolved (so a link cannot borrow a trust). */
export function workspaceKey(dir: string): string {
  const abs = resolve(dir);
  try {
    return realpathSync(abs);
  } catch {
    return abs;
  }
}

/** True when the user's file trusts the workspace `dir`. */
export function isTrustedWorkspace(user: ConfigFile | null, dir: string): boolean {
  return user?.workspaces?.[workspaceKey(dir)]?.trusted === true;
}

/** The workspaces the user's file trusts. */
export function trustedWorkspaces(user: ConfigFile | null): string[] {
  return Object.entries(user?.workspaces ?? {}).filter(([, w]) => w.trusted).map(([dir]) => dir);
}

/** What a workspace file contributes, and each key it set that does not count, with why. */
export interface WorkspaceLayer {
  file: ConfigFile;
  ignored: string[];
}

/**
 * The part of a workspace file that counts. Trusted: all of it but the user-only keys. Untrusted:
 * harmless keys (model name, capabilities, prices, output budget, parallel calls, instructions:
 * they change what the model is told, never what it may do, since policy gates every call), additions to
 * redaction, deny and ask rules, a stricter run mode and a shorter approval life; never an
 * endpoint, a key variable, a NATS server or credentials, a data dir, a looser run mode or allow
 * rules (which carry the network and environment grants).
 */
export function workspaceLayer(ws: ConfigFile | null, user: ConfigFile | null, trusted: boolean): WorkspaceLayer {
  if (!ws) return { file: {}, ignored: [] };
  const ignored: string[] = [];
  const file: ConfigFile = { ...ws };
  for (const key of USER_ONLY) {
    if (file[key] === undefined) continue;
    delete file[key];
    ignored.push(`${key}: only the user's config file sets it`);
  }
  const allowsTrusted = trusted || user?.trust_workspace_policy === true;
  const rules = file.policy?.rules;
  if (rules && !allowsTrusted) {
    const kept: PolicyRule[] = [];
    rules.forEach((r, i) => {
      if (r.decision === 'allow') ignored.push(`policy rule ${r.id ?? i + 1} (allow): an untrusted workspace only adds deny and ask rules`);
      else kept.push(r);
    });
    file.policy = { rules: kept };
  }
  if (trusted) return { file, ignored };
  const hint = 'an untrusted workspace cannot set it (trust it with `actorloop trust <dir>`, or set it in your own config)';
  for (const key of NEVER_UNTRUSTED) {
    if (file[key] === undefined) continue;
    delete file[key];
    ignored.push(`${key}: ${hint}`);
  }
  const baseMode = user?.approval_mode ?? DEFAULT_APPROVAL_MODE;
  if (file.approval_mode !== undefined && stricterMode(file.approval_mode, baseMode) !== file.approval_mode) {
    ignored.push(`approval_mode = "${file.approval_mode}": looser than "${baseMode}", and an untrusted workspace only tightens`);
    delete file.approval_mode;
  }
  const baseTtl = user?.approval_ttl_seconds ?? DEFAULT_APPROVAL_TTL_SECONDS;
  if (file.approval_ttl_seconds !== undefined && file.approval_ttl_seconds > baseTtl) {
    ignored.push(`approval_ttl_seconds = ${file.approval_ttl_seconds}: longer than ${baseTtl}, and an untrusted workspace only shortens it`);
    delete file.approval_ttl_seconds;
  }
  // subagent limits only go down, and a workspace may ask that a parent's end cancel its children, never detach them
  for (const [key, dflt] of [['max_subagent_depth', DEFAULT_SUBAGENT_LIMITS.maxDepth], ['max_children_per_parent', DEFAULT_SUBAGENT_LIMITS.maxChildrenPerParent], ['max_children_per_tree', DEFAULT_SUBAGENT_LIMITS.maxChildrenPerTree]] as const) {
    const base = user?.[key] ?? dflt;
    const v = file[key];
    if (v !== undefined && v > base) {
      ignored.push(`${key} = ${v}: above ${base}, and an untrusted workspace only lowers it`);
      delete file[key];
    }
  }
  // job limits only go down too: a workspace may not let its jobs run longer or more at once
  for (const [key, dflt] of [
    ['max_running_jobs', DEFAULT_JOB_LIMITS.maxRunningPerHost], ['max_running_jobs_per_tree', DEFAULT_JOB_LIMITS.maxRunningPerTree],
    ['max_queued_jobs', DEFAULT_JOB_LIMITS.maxQueued], ['job_timeout_seconds', DEFAULT_JOB_LIMITS.timeoutSeconds],
  ] as const) {
    const base = user?.[key] ?? dflt;
    const v = file[key];
    if (v !== undefined && v > base) {
      ignored.push(`${key} = ${v}: above ${base}, and an untrusted workspace only lowers it`);
      delete file[key];
    }
  }
  if (file.on_parent_end === 'detach' && (user?.on_parent_end ?? DEFAULT_SUBAGENT_LIMITS.onParentEnd) !== 'detach') {
    ignored.push('on_parent_end = "detach": looser than "cancel", and an untrusted workspace only tightens');
    delete file.on_parent_end;
  }
  const baseAskTtl = user?.ask_ttl_seconds ?? DEFAULT_ASK_TTL_SECONDS;
  if (file.ask_ttl_seconds !== undefined && file.ask_ttl_seconds > baseAskTtl) {
    ignored.push(`ask_ttl_seconds = ${file.ask_ttl_seconds}: longer than ${baseAskTtl}, and an untrusted workspace only shortens it`);
    delete file.ask_ttl_seconds;
  }
  return { file, ignored };
}

/**
 * The settings of both files together: the user's win over the workspace's, except where the
 * workspace tightens (a stricter run mode, a shorter approval life); rules and redactions add up.
 */
export function mergeLayers(ws: ConfigFile, user: ConfigFile | null): ConfigFile {
  const merged: ConfigFile = { ...ws, ...(user ?? {}) };
  const wsMode = ws.approval_mode;
  if (wsMode !== undefined) merged.approval_mode = stricterMode(wsMode, user?.approval_mode ?? wsMode);
  if (ws.approval_ttl_seconds !== undefined && user?.approval_ttl_seconds !== undefined) {
    merged.approval_ttl_seconds = Math.min(ws.approval_ttl_seconds, user.approval_ttl_seconds);
  }
  if (ws.ask_ttl_seconds !== undefined && user?.ask_ttl_seconds !== undefined) {
    merged.ask_ttl_seconds = Math.min(ws.ask_ttl_seconds, user.ask_ttl_seconds);
  }
  for (const key of ['max_subagent_depth', 'max_children_per_parent', 'max_children_per_tree', 'max_running_jobs', 'max_running_jobs_per_tree', 'max_queued_jobs', 'job_timeout_seconds'] as const) {
    if (ws[key] !== undefined && user?.[key] !== undefined) merged[key] = Math.min(ws[key], user[key]);
  }
  if (ws.on_parent_end === 'cancel') merged.on_parent_end = 'cancel';
  const rules = [...(user?.policy?.rules ?? []), ...(ws.policy?.rules ?? [])];
  merged.policy = { rules };
  const redact = [...new Set([...(ws.redact_env ?? []), ...(user?.redact_env ?? [])])];
  if (redact.length > 0) merged.redact_env = redact;
  return merged;
}
