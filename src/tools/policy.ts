import path from 'node:path';
import picomatch from 'picomatch';
import { canonicalJson, sha256Digest } from '../protocol/canonical-json.js';
import type { ApprovalMode } from '../protocol/events.js';
import { compileRule, describeRule, type CompiledRule, type PolicyRule } from './policy-rules.js';
import { globNamesProtected, protectedPart, protectedReason } from './protected-paths.js';
import { commandMayMatch, commandSurelyMatches, type ParsedCommand, type SimpleCommand } from './shell-command.js';
import type { ExecutionPlan, ResourceKey, SideEffectLevel } from './tool.js';

export { PolicyRuleSchema, type PolicyRule } from './policy-rules.js';

/*
 * The policy (design §8): allow, ask or deny one tool call. Pure: the same rules, mode and facts
 * give the same decision, so it can run again at execution time and in tests.
 *
 * In order:
 * 1. Shell refusals come first (`shell:unparseable`, `shell:too-many-commands`, `shell:too-deep`,
 *    `shell:dynamic-program`). A command that cannot be parsed, chains more than 16 simple
 *    commands or nests scripts too deep is denied with the parser's reason; so is a program whose
 *    name is an expansion (`$CMD args`, `bash -c "$X"`, `sh < f`): nobody can tell what would
 *    run. A deny rule that matches the latter still names the denial (`echo id | xargs sudo`).
 * 2. Config rules. A rule matches when every field it gives matches: tool (names, `*` glob),
 *    level, untrusted_context, paths, command. Paths: a deny/ask rule needs any touched path to
 *    match a glob, an allow rule needs every touched path to; a call that touches no path never
 *    matches a rule with paths. Command (shell calls only; a rule with command never matches
 *    another tool): a deny/ask rule matches when ANY simple command (or a wrapper around one,
 *    like `sudo`) may start with one of its prefixes — dynamic words may be anything and options
 *    are skipped, so evasions still match. Allow rules are judged together: they match only when
 *    EVERY simple command surely starts with a prefix of some matching allow rule (static words,
 *    exact), so an allow for `git status` does not cover `git status && rm -rf /`; a command
 *    run through sudo/doas/su also needs its privileged wrapper allowed (`command = "sudo"`).
 *    Among matching rules deny beats ask beats allow; the first rule of the winning kind names
 *    the decision (`config:<id>` or `config:<1-based position>`).
 * 2a. Protected paths (`protected:.git`, `protected:actorloop.toml`; see protected-paths.ts): a call
 *    that writes inside a `.git` or the workspace's actorloop.toml is denied, in every mode, unless
 *    an allow rule that matches the call names each such path in its paths (`.git/**` does, `**`
 *    does not). A deny rule still wins over that allow.
 * 3. No rule matched: defaults by level — read allows, write asks, execute asks, network denies.
 *    `auto-edit` allows writes; `full-auto` allows writes and execute; network stays denied.
 * 3a. Opaque commands fail closed (`shell:opaque`): a shell call with a command whose real work
 *    the parser cannot see (`python3 -c …`, `bash run.sh`, `source f`, `strace cmd`; see
 *    shell-opaque.ts) is never allowed, by a rule or a mode, while a deny or ask rule with a
 *    command could match what it hides — one whose other fields (tool, level, untrusted_context)
 *    match the call; its paths are not compared, since what the command touches is unknown too.
 *    It asks in ask and auto-edit, and is denied in full-auto, the mode in which the person said
 *    not to be asked about commands (so a run there does not stop for it, and the model is told
 *    to run the commands directly), as in deny-all. An ask from a rule that matched the command
 *    itself stays that rule's ask. Without such a rule it follows the mode.
 * 4. An execute-level call (shell) without bubblewrap that would be allowed asks instead, in
 *    every mode and over allow rules: full-auto never leaves the sandbox, it asks first.
 * 5. `deny-all` turns every ask, from a rule, a default or step 4, into a deny: nobody is there.
 *
 * An allowed call gets `network` when a matching allow rule says `network = true`, and the union
 * of their `env_allow`. `effects` is carried for the record; no rule reads it yet.
 */

/** How much a turn may do without asking; explicit rules win over it (`deny-all` aside). */
export type RunMode = ApprovalMode;

/** What the policy knows about one call. */
export interface PolicyFacts {
  tool: string;
  level: SideEffectLevel;
  effects: 'none' | 'possible';
  plan: ExecutionPlan;
  /** Whether the step read untrusted content (web pages, tool output) since the last user message. */
  untrustedContext: boolean;
  /** Whether bubblewrap is installed, so shell runs sandboxed. */
  sandboxed: boolean;
  /** The parsed command of a shell call; null for other tools. */
  shell: ParsedCommand | null;
}

/** A decision, which rule made it, and what an allowed call is granted. */
export interface PolicyDecision {
  decision: 'allow' | 'ask' | 'deny';
  /** `config:<id|n>`, `default:<level>`, `mode:<mode>`, `shell:<refusal>`, `shell:no-sandbox`. */
  rule: string;
  /** What happened and what to do, for the model and the person; null for a plain allow. */
  reason: string | null;
  /** Whether the sandbox may reach the network (only an allow rule with `network = true` grants it). */
  network: boolean;
  /** Secret-looking environment names passed through (from matching allow rules). */
  envAllow: string[];
}

/** Why shell without bubblewrap asks: the model and the person both read it. */
export const NO_SANDBOX_REASON =
  'bubblewrap is not installed, so this command would run unsandboxed; install bubblewrap (apt-get install bubblewrap) to let rules and full-auto allow shell';

const PRIVATE = { network: false, envAllow: [] as string[] };

/** Decides one call from the config rules, the run mode and the facts of the call. */
export function decide(rules: readonly PolicyRule[], mode: RunMode, facts: PolicyFacts): PolicyDecision {
  const refused = parseRefusal(facts.shell);
  if (refused) return refused;
  const compiled = rules.map(compileRule);
  const ruled = fromRules(compiled, facts);
  if (ruled?.decision === 'deny') return ruled;
  const guarded = protectedRefusal(compiled, facts);
  if (guarded) return guarded;
  const dynamic = dynamicRefusal(facts.shell);
  if (dynamic) return dynamic;
  let d = failClosed(ruled ?? fromDefaults(mode, facts), compiled, mode, facts);
  if (d.decision === 'allow' && facts.level === 'execute' && !facts.sandboxed) {
    d = { decision: 'ask', rule: 'shell:no-sandbox', reason: NO_SANDBOX_REASON, ...PRIVATE };
  }
  if (mode === 'deny-all' && d.decision === 'ask') {
    const why = d.reason ? ` (it would have asked: ${d.reason})` : '';
    d = { decision: 'deny', rule: 'mode:deny-all', reason: `run mode deny-all: nobody to ask${why}; do not retry this call`, ...PRIVATE };
  }
  return d;
}

/** Step 2a: the first written protected path no matching allow rule names. */
function protectedRefusal(rules: CompiledRule[], facts: PolicyFacts): PolicyDecision | null {
  const written = facts.plan.paths.filter((p) => p.mode === 'write' && protectedPart(p.path) !== null);
  if (written.length === 0) return null;
  const allows = rules.filter((r) => r.decision === 'allow' && r.paths && matchesBase(r, facts));
  const bare = written.find((p) => !allows.some((r) => r.paths!.some((g) => globNamesProtected(g, p.path))));
  if (!bare) return null;
  const part = protectedPart(bare.path)!;
  return { decision: 'deny', rule: `protected:${part}`, reason: protectedReason(facts.tool, bare.path, part), ...PRIVATE };
}

function parseRefusal(shell: ParsedCommand | null): PolicyDecision | null {
  if (!shell || shell.ok) return null;
  return { decision: 'deny', rule: `shell:${shell.code}`, reason: shell.reason, ...PRIVATE };
}

function dynamicRefusal(shell: ParsedCommand | null): PolicyDecision | null {
  if (!shell?.ok) return null;
  const dyn = shell.commands.find((c) => c.dynamicProgram);
  if (!dyn) return null;
  const reason =
    dyn.words[0]?.kind === 'static'
      ? `cannot tell which program runs: ${JSON.stringify(dyn.argv.join(' '))} runs a script that is only known at run time ` +
        '(from an expansion or stdin); write its commands literally (single quotes keep $VAR for the inner shell) or save the script to a file first'
      : `cannot tell which program runs: the program name ${JSON.stringify(dyn.argv[0])} is only known at run time; write the program name literally`;
  return { decision: 'deny', rule: 'shell:dynamic-program', reason, ...PRIVATE };
}

/**
 * Step 3a: an opaque command under a deny or ask rule that could match what it hides. An ask
 * from a rule that matched the command itself stands: that rule's author wants to be asked.
 */
function failClosed(d: PolicyDecision, rules: CompiledRule[], mode: RunMode, facts: PolicyFacts): PolicyDecision {
  if (d.decision === 'deny' || (d.decision === 'ask' && d.rule.startsWith('config:')) || !facts.shell?.ok) return d;
  const hidden = facts.shell.commands.find((c) => c.opaque !== null);
  if (!hidden) return d;
  const guard = rules.find((r) => r.decision !== 'allow' && r.prefixes && matchesBase(r, facts, false));
  if (!guard) return d;
  const why = `${hidden.opaque}, and policy ${guard.label} (${guard.reason ?? describeRule(guard)}) may match a command it runs`;
  if (mode === 'full-auto') {
    const reason = `${why}; run mode full-auto asks nobody, so it is denied — run those commands directly, where the policy can check them, instead of retrying this command`;
    return { decision: 'deny', rule: 'shell:opaque', reason, ...PRIVATE };
  }
  return { decision: 'ask', rule: 'shell:opaque', reason: `${why}, so it needs approval`, ...PRIVATE };
}

function fromRules(rules: CompiledRule[], facts: PolicyFacts): PolicyDecision | null {
  const thing = facts.shell ? 'command' : 'call';
  const deny = rules.find((r) => r.decision === 'deny' && matches(r, facts));
  if (deny) {
    const reason = `denied by policy ${deny.label} (${deny.reason ?? describeRule(deny)}); do not retry this ${thing}`;
    return { decision: 'deny', rule: deny.name, reason, ...PRIVATE };
  }
  const ask = rules.find((r) => r.decision === 'ask' && matches(r, facts));
  if (ask) {
    const reason = `policy ${ask.label} asks for approval (${ask.reason ?? describeRule(ask)})`;
    return { decision: 'ask', rule: ask.name, reason, ...PRIVATE };
  }
  const allowed = matchingAllows(rules.filter((r) => r.decision === 'allow' && matchesBase(r, facts)), facts);
  const first = allowed[0];
  if (!first) return null;
  return {
    decision: 'allow',
    rule: first.name,
    reason: null,
    network: allowed.some((r) => r.network),
    envAllow: [...new Set(allowed.flatMap((r) => r.envAllow))].sort(),
  };
}

/** Whether a deny or ask rule matches: every field given, a command when any simple command may match. */
function matches(r: CompiledRule, facts: PolicyFacts): boolean {
  if (!matchesBase(r, facts)) return false;
  if (!r.prefixes) return true;
  const cmds = facts.shell?.ok ? facts.shell.commands : [];
  const prefixes = r.prefixes;
  return cmds.some((c) => prefixes.some((p) => commandMayMatch(c.words, p) || c.wrappers.some((w) => commandMayMatch(w.words, p))));
}

/** Every field but command (and but paths, when `withPaths` is false). */
function matchesBase(r: CompiledRule, facts: PolicyFacts, withPaths = true): boolean {
  if (r.tools && !r.tools.some((t) => picomatch.isMatch(facts.tool, t))) return false;
  if (r.levels && !r.levels.includes(facts.level)) return false;
  if (r.untrustedContext !== null && r.untrustedContext !== facts.untrustedContext) return false;
  if (r.prefixes && !facts.shell) return false;
  if (r.paths && withPaths) {
    const touched = facts.plan.paths.map((p) => p.path);
    if (touched.length === 0) return false;
    const isMatch = picomatch(r.paths, { dot: true });
    return r.decision === 'allow' ? touched.every((p) => isMatch(p)) : touched.some((p) => isMatch(p));
  }
  return true;
}

/**
 * The allow rules (already matching on every other field) that match together, in config order:
 * those without a command, plus, when every simple command is covered by some command rule, the
 * command rules that cover one.
 */
function matchingAllows(candidates: CompiledRule[], facts: PolicyFacts): CompiledRule[] {
  const plain = candidates.filter((r) => !r.prefixes);
  const withCommand = candidates.filter((r) => r.prefixes);
  const cmds = facts.shell?.ok ? facts.shell.commands : [];
  if (withCommand.length === 0 || cmds.length === 0) return plain;
  const used = new Set<CompiledRule>();
  for (const c of cmds) {
    const covering = withCommand.filter((r) => covers(r, c));
    if (covering.length === 0) return plain;
    for (const r of covering) used.add(r);
    // A privileged run needs its wrapper allowed too: an allow for `git status` is not one for `sudo git status`.
    for (const w of c.wrappers.filter((x) => x.privileged)) {
      const wrapperRules = withCommand.filter((r) => r.prefixes?.some((p) => commandSurelyMatches(w.words, p)));
      if (wrapperRules.length === 0) return plain;
      for (const r of wrapperRules) used.add(r);
    }
  }
  return candidates.filter((r) => !r.prefixes || used.has(r));
}

function covers(r: CompiledRule, c: SimpleCommand): boolean {
  return r.prefixes?.some((p) => commandSurelyMatches(c.words, p)) ?? false;
}

function fromDefaults(mode: RunMode, facts: PolicyFacts): PolicyDecision {
  const { level, tool } = facts;
  const base = (decision: PolicyDecision['decision'], reason: string | null): PolicyDecision => ({
    decision,
    rule: `default:${level}`,
    reason,
    ...PRIVATE,
  });
  switch (level) {
    case 'read':
      return base('allow', null);
    case 'write':
      if (mode === 'auto-edit' || mode === 'full-auto') return { ...base('allow', null), rule: `mode:${mode}` };
      return base('ask', `${tool} changes workspace files, which needs approval in run mode ${mode}`);
    case 'execute':
      if (mode === 'full-auto') return { ...base('allow', null), rule: 'mode:full-auto' };
      return base('ask', `${tool} runs a process, which needs approval in run mode ${mode}`);
    case 'network':
      return base(
        'deny',
        `${tool} reaches the network, which the policy denies unless a rule allows it; do not retry this call — ask the user to add an allow rule if it is needed`,
      );
  }
}

/** `sha256:<hex>` of a plan's canonical JSON: what an approval is bound to. */
export function planDigest(plan: ExecutionPlan): string {
  return sha256Digest(canonicalJson(plan));
}

/** The plan of a tool without `plan()`: its validated input and the paths of its resource keys. */
export function defaultPlan(
  tool: { name: string; version: string },
  input: unknown,
  resources: readonly ResourceKey[],
  workspace: string,
): ExecutionPlan {
  const paths: ExecutionPlan['paths'] = [];
  for (const r of resources) {
    if (!r.key.startsWith('path:')) continue;
    const rel = path.relative(workspace, r.key.slice('path:'.length)).split(path.sep).join('/') || '.';
    if (!paths.some((p) => p.path === rel && p.mode === r.mode)) paths.push({ path: rel, mode: r.mode });
  }
  return { tool: tool.name, version: tool.version, paths, network: false, input };
}
