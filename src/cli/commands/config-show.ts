import type { ConfigSource, EffectiveConfig } from '../../config/config.js';
import type { Out } from '../output.js';
import { terminalText } from '../../client/terminal-text.js';

/** How `config show` names each source of a value. */
const SOURCE_WORDS: Record<ConfigSource, string> = { default: 'default', workspace: 'workspace file', user: 'user file', env: 'environment', flag: 'flag' };

/** The first line of a long text, clipped, with its size: enough to tell which instructions are in force. */
function preview(text: string): string {
  const first = text.trim().split('\n')[0]!;
  const clipped = first.length > 60 ? `${first.slice(0, 59)}…` : first;
  return `"${clipped}"${first.length > 60 || text.trim().includes('\n') ? ` (${text.length} characters)` : ''}`;
}

/**
 * `actorloop config show [--cwd DIR]`: the settings a command run in that workspace gets, the
 * files they came from, whether the workspace is trusted, and each key of its actorloop.toml
 * that did not count and why; each value names where it came from (default, workspace file, user
 * file, environment, flag). Names of secrets only, never their values.
 */
export function configShowCommand(opts: { json?: boolean }, config: EffectiveConfig, out: Out): number {
  if (opts.json) {
    out.stdout.write(`${JSON.stringify(config)}\n`);
    return 0;
  }
  const t = (s: string) => terminalText(s, 'line');
  const lines: string[] = [];
  // each value says where it came from: `approval_mode: deny-all (flag)`
  const from = (key: string): string => ` (${SOURCE_WORDS[config.sources[key] ?? 'default']})`;
  lines.push(`workspace: ${t(config.workspace.dir)} (${config.workspace.trusted ? 'trusted' : 'not trusted: its actorloop.toml may only tighten'})`);
  lines.push(`files read: ${config.configFiles.length > 0 ? config.configFiles.map(t).join(', ') : '(none)'}`);
  lines.push(`model: ${t(config.defaultModel ?? '(none: pass --model)')}${from('model')}`);
  lines.push(`base_url: ${t(config.openaiBaseUrl ?? '(provider default)')}${from('base_url')}`);
  lines.push(`api key: ${config.apiKeyEnv ? `from ${config.apiKeyEnv}` : '(none set)'}${from('api_key_env')}`);
  lines.push(`instructions: ${config.instructions === null ? '(built-in)' : t(preview(config.instructions))}${from('instructions')}`);
  lines.push(`data_dir: ${t(config.dataDir)}${from('data_dir')}`);
  lines.push(`nats: ${t(config.natsUrl ?? 'embedded nats-server (logins in the data dir)')}${config.natsUrl ? ` · login: ${config.natsLogin}` : ''}${from('nats_url')}`);
  lines.push(`approval_mode: ${config.approvalMode}${from('approval_mode')}`);
  lines.push(`approval_ttl_seconds: ${config.approvalTtlMs / 1000}${from('approval_ttl_seconds')}`);
  lines.push(`interrupt_follow_ups: ${config.interruptFollowUps}${from('interrupt_follow_ups')}`);
  lines.push(`max_idle_turns: ${config.maxIdleTurns}${from('max_idle_turns')}`);
  lines.push(`max_subagent_depth: ${config.subagents.maxDepth}${from('max_subagent_depth')}`);
  lines.push(`max_children_per_parent: ${config.subagents.maxChildrenPerParent}${from('max_children_per_parent')}`);
  lines.push(`max_children_per_tree: ${config.subagents.maxChildrenPerTree}${from('max_children_per_tree')}`);
  lines.push(`on_parent_end: ${config.subagents.onParentEnd}${from('on_parent_end')}`);
  lines.push(`max_running_jobs: ${config.jobs.maxRunningPerHost}${from('max_running_jobs')}`);
  lines.push(`max_running_jobs_per_tree: ${config.jobs.maxRunningPerTree}${from('max_running_jobs_per_tree')}`);
  lines.push(`max_queued_jobs: ${config.jobs.maxQueued}${from('max_queued_jobs')}`);
  lines.push(`job_timeout_seconds: ${config.jobs.timeoutSeconds}${from('job_timeout_seconds')}`);
  lines.push(`job_kill_grace_ms: ${config.jobs.killGraceMs}${from('job_kill_grace_ms')}`);
  lines.push(`ask_ttl_seconds: ${config.askTtlMs / 1000}${from('ask_ttl_seconds')}`);
  lines.push(`max_parallel_calls: ${config.maxParallelCalls}${from('max_parallel_calls')}`);
  lines.push(`observation_budget_bytes: ${config.observationBudgetBytes}${from('observation_budget_bytes')}`);
  lines.push(`max_model_output_bytes: ${config.maxModelOutputBytes}${from('max_model_output_bytes')}`);
  lines.push(`complete_when: ${config.completeWhen}${from('complete_when')}`);
  lines.push(`verify_commands: ${config.verifyCommands.length > 0 ? config.verifyCommands.map((c) => t(JSON.stringify(c))).join(', ') : '(none)'}${from('verify_commands')}`);
  lines.push(`max_completion_rejections: ${config.maxCompletionRejections}${from('max_completion_rejections')}`);
  lines.push(`on_completion_exhausted: ${config.onCompletionExhausted}${from('on_completion_exhausted')}`);
  const models = (r: Record<string, unknown>) => (Object.keys(r).length > 0 ? Object.keys(r).map(t).join(', ') : '(built-in table)');
  lines.push(`capabilities: ${models(config.capabilities)}${from('capabilities')}`);
  lines.push(`pricing: ${models(config.pricing)}${from('pricing')}`);
  lines.push(`policy rules: ${config.policyRules.length}${from('policy')}`);
  for (const [i, r] of config.policyRules.entries()) lines.push(`  ${i + 1}. ${t(JSON.stringify(r))}`);
  lines.push(`redacted variables: ${config.redactEnv.join(', ')}${from('redact_env')}`);
  lines.push(`trusted workspaces: ${config.trustedWorkspaces.length > 0 ? config.trustedWorkspaces.map(t).join(', ') : '(none)'}`);
  if (config.ignoredKeys.length > 0) {
    lines.push('ignored:');
    for (const note of config.ignoredKeys) lines.push(`  ${t(note)}`);
  }
  out.stdout.write(`${lines.join('\n')}\n`);
  return 0;
}
