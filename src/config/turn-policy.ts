import { statSync } from 'node:fs';
import { z } from 'zod';
import type { ApprovalMode } from '../protocol/events.js';
import { PolicyRuleSchema, type PolicyRule } from '../protocol/policy-rule.js';
import { readConfigFile, type ConfigFile } from './config-file.js';
import { configFilePaths, environmentOf, type EffectiveConfig } from './config.js';
import { isTrustedWorkspace, mergeLayers, stricterMode, workspaceLayer } from './workspace-trust.js';

/** What a turn's policy is computed from: what its `turn/start` recorded. */
export interface RecordedTurnSettings {
  workspace: string;
  approvalMode?: ApprovalMode | undefined;
  /** The effective config the run started with (`settings.config`), whose `policyRules` it ran under. */
  config?: Record<string, unknown> | undefined;
}

/** The rules and run mode a call is decided by. */
export interface CurrentPolicy {
  rules: PolicyRule[];
  mode: ApprovalMode;
}

/**
 * The policy of a turn now (design §11a): the user's file and the turn's own workspace file as
 * they are at this moment (re-read when they change, whichever process hosts the turn and
 * wherever it was started), plus the deny and ask rules the turn started under, in the stricter
 * of its recorded run mode and the workspace file's. A file that no longer parses denies every
 * call until it is fixed: a policy that cannot be read must not fall open.
 */
export function createPolicySource(config: EffectiveConfig): (settings: RecordedTurnSettings) => CurrentPolicy {
  const env = environmentOf(config);
  const files = new Map<string, { stamp: string; file: ConfigFile | null; error: string | null }>();
  const read = (path: string): { file: ConfigFile | null; error: string | null } => {
    const stamp = stampOf(path);
    const cached = files.get(path);
    if (cached && cached.stamp === stamp) return cached;
    let entry: { stamp: string; file: ConfigFile | null; error: string | null };
    try {
      entry = { stamp, file: readConfigFile(path), error: null };
    } catch (err) {
      entry = { stamp, file: null, error: (err as Error).message };
    }
    files.set(path, entry);
    return entry;
  };
  return (settings) => {
    const paths = configFilePaths(settings.workspace, env);
    const user = read(paths.user);
    const ws = read(paths.workspace);
    const recorded = recordedRules(settings.config).filter((r) => r.decision !== 'allow');
    const mode = settings.approvalMode ?? 'ask';
    const broken = user.error ?? ws.error;
    if (broken) {
      return { rules: [{ tool: '*', decision: 'deny', reason: `${broken}; fix the file, then retry` }, ...recorded], mode };
    }
    const layer = workspaceLayer(ws.file, user.file, isTrustedWorkspace(user.file, settings.workspace));
    const merged = mergeLayers(layer.file, user.file);
    const current = merged.policy?.rules ?? [];
    const seen = new Set(current.map((r) => JSON.stringify(r)));
    const rules = [...current, ...recorded.filter((r) => !seen.has(JSON.stringify(r)))];
    return { rules, mode: layer.file.approval_mode ? stricterMode(mode, layer.file.approval_mode) : mode };
  };
}

// a file's identity and version: an edit changes its mtime or size, a replacement its inode
function stampOf(path: string): string {
  try {
    const s = statSync(path, { bigint: true });
    return `${s.ino}:${s.size}:${s.mtimeNs}`;
  } catch {
    return 'absent';
  }
}

const RecordedRulesSchema = z.array(PolicyRuleSchema);

/** The rules a turn's recorded config names; none when it recorded none or they no longer parse. */
function recordedRules(config: Record<string, unknown> | undefined): PolicyRule[] {
  const parsed = RecordedRulesSchema.safeParse(config?.policyRules);
  return parsed.success ? parsed.data : [];
}
