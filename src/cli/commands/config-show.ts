import type { EffectiveConfig } from '../../config/config.js';
import type { Out } from '../output.js';
import { terminalText } from '../terminal-text.js';

/**
 * `actorloop config show [--cwd DIR]`: the settings a command run in that workspace gets, the
 * files they came from, whether the workspace is trusted, and each key of its actorloop.toml
 * that did not count and why. Names of secrets only, never their values.
 */
export function configShowCommand(opts: { json?: boolean }, config: EffectiveConfig, out: Out): number {
  if (opts.json) {
    out.stdout.write(`${JSON.stringify(config)}\n`);
    return 0;
  }
  const t = (s: string) => terminalText(s, 'line');
  const lines: string[] = [];
  lines.push(`workspace: ${t(config.workspace.dir)} (${config.workspace.trusted ? 'trusted' : 'not trusted: its actorloop.toml may only tighten'})`);
  lines.push(`files read: ${config.configFiles.length > 0 ? config.configFiles.map(t).join(', ') : '(none)'}`);
  lines.push(`model: ${t(config.defaultModel ?? '(none: pass --model)')}`);
  lines.push(`base_url: ${t(config.openaiBaseUrl ?? '(provider default)')}`);
  lines.push(`api key: ${config.apiKeyEnv ? `from ${config.apiKeyEnv}` : '(none set)'}`);
  lines.push(`data_dir: ${t(config.dataDir)}`);
  lines.push(`nats: ${t(config.natsUrl ?? 'embedded nats-server (logins in the data dir)')}${config.natsUrl ? ` · login: ${config.natsLogin}` : ''}`);
  lines.push(`approval_mode: ${config.approvalMode}`);
  lines.push(`approval_ttl_seconds: ${config.approvalTtlMs / 1000}`);
  lines.push(`interrupt_follow_ups: ${config.interruptFollowUps}`);
  lines.push(`ask_ttl_seconds: ${config.askTtlMs / 1000}`);
  lines.push(`policy rules: ${config.policyRules.length}`);
  for (const [i, r] of config.policyRules.entries()) lines.push(`  ${i + 1}. ${t(JSON.stringify(r))}`);
  lines.push(`redacted variables: ${config.redactEnv.join(', ')}`);
  lines.push(`trusted workspaces: ${config.trustedWorkspaces.length > 0 ? config.trustedWorkspaces.map(t).join(', ') : '(none)'}`);
  if (config.ignoredKeys.length > 0) {
    lines.push('ignored:');
    for (const note of config.ignoredKeys) lines.push(`  ${t(note)}`);
  }
  out.stdout.write(`${lines.join('\n')}\n`);
  return 0;
}
