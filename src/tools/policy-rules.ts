import type { SideEffectLevel } from './tool.js';
import type { PolicyRule } from '../protocol/policy-rule.js';

export { PolicyRuleSchema, type PolicyRule } from '../protocol/policy-rule.js';

// One `[[policy.rules]]` entry of actorloop.toml and the normalized form the policy matches with.
// Every field a rule gives must match for the rule to match; see policy.ts for how rules combine.

/** A rule in the form the policy matches with: lists everywhere, prefixes as words. */
export interface CompiledRule {
  /** `config:<id>` or `config:<position>`. */
  name: string;
  /** How a sentence names the rule: `rule 2` or `rule "no-push"`. */
  label: string;
  decision: PolicyRule['decision'];
  tools: string[] | null;
  paths: string[] | null;
  prefixes: string[][] | null;
  levels: SideEffectLevel[] | null;
  untrustedContext: boolean | null;
  network: boolean;
  envAllow: string[];
  reason: string | null;
}

const words = (prefix: string): string[] => prefix.trim().split(/\s+/);

/** Normalizes a validated rule; `index` is its 0-based position in the config. */
export function compileRule(rule: PolicyRule, index: number): CompiledRule {
  const { command } = rule;
  let prefixes: string[][] | null = null;
  if (typeof command === 'string') prefixes = [words(command)];
  else if (command && command.every((w) => typeof w === 'string')) prefixes = [command as string[]];
  else if (command) prefixes = command as string[][];
  return {
    name: `config:${rule.id ?? index + 1}`,
    label: rule.id === undefined ? `rule ${index + 1}` : `rule ${JSON.stringify(rule.id)}`,
    decision: rule.decision,
    tools: rule.tool === undefined ? null : [rule.tool].flat(),
    paths: rule.paths ?? null,
    prefixes,
    levels: rule.level === undefined ? null : [rule.level].flat(),
    untrustedContext: rule.untrusted_context ?? null,
    network: rule.network === true,
    envAllow: rule.env_allow ?? [],
    reason: rule.reason ?? null,
  };
}

/** What a rule matches, for sentences: `command "git push", paths src/**`. */
export function describeRule(r: CompiledRule): string {
  const parts: string[] = [];
  if (r.tools) parts.push(`tool ${r.tools.join(' or ')}`);
  if (r.prefixes) parts.push(`command ${r.prefixes.map((p) => JSON.stringify(p.join(' '))).join(' or ')}`);
  if (r.paths) parts.push(`paths ${r.paths.join(', ')}`);
  if (r.levels) parts.push(`level ${r.levels.join(' or ')}`);
  if (r.untrustedContext !== null) parts.push(r.untrustedContext ? 'after untrusted content' : 'without untrusted content');
  return parts.length > 0 ? parts.join(', ') : 'every call';
}
