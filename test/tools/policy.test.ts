import { describe, expect, it } from 'vitest';
import {
  decide,
  defaultPlan,
  NO_SANDBOX_REASON,
  planDigest,
  PolicyRuleSchema,
  type PolicyFacts,
  type PolicyRule,
  type RunMode,
} from '../../src/tools/policy.js';
import { parseShellCommand } from '../../src/tools/shell-command.js';
import type { ExecutionPlan, SideEffectLevel } from '../../src/tools/tool.js';

const MODES: RunMode[] = ['ask', 'auto-edit', 'full-auto', 'deny-all'];

function rules(...raw: unknown[]): PolicyRule[] {
  return raw.map((r) => PolicyRuleSchema.parse(r));
}

function plan(tool: string, paths: string[] = [], mode: 'read' | 'write' = 'write'): ExecutionPlan {
  return { tool, version: '1', paths: paths.map((path) => ({ path, mode })), network: false };
}

/** A non-shell call. */
function call(tool: string, level: SideEffectLevel, over: Partial<PolicyFacts> = {}): PolicyFacts {
  return { tool, level, effects: level === 'read' ? 'none' : 'possible', plan: plan(tool), untrustedContext: false, sandboxed: true, shell: null, ...over };
}

/** A shell call (sandboxed unless told otherwise). */
function sh(command: string, over: Partial<PolicyFacts> = {}): PolicyFacts {
  return { ...call('shell', 'execute'), shell: parseShellCommand(command), ...over };
}

const noPush = rules({ command: 'git push', decision: 'deny', reason: 'git push is not allowed here' });

describe('defaults by level and run mode', () => {
  const table: Record<RunMode, Record<SideEffectLevel, string>> = {
    ask: { read: 'allow', write: 'ask', execute: 'ask', network: 'deny' },
    'auto-edit': { read: 'allow', write: 'allow', execute: 'ask', network: 'deny' },
    'full-auto': { read: 'allow', write: 'allow', execute: 'allow', network: 'deny' },
    'deny-all': { read: 'allow', write: 'deny', execute: 'deny', network: 'deny' },
  };
  for (const mode of MODES) {
    for (const level of ['read', 'write', 'execute', 'network'] as const) {
      it(`${mode} mode, ${level} tool: ${table[mode][level]}`, () => {
        expect(decide([], mode, call('t', level)).decision).toBe(table[mode][level]);
      });
    }
  }

  it('names the default or the mode that decided, with a reason for ask and deny', () => {
    expect(decide([], 'ask', call('read_file', 'read'))).toEqual({ decision: 'allow', rule: 'default:read', reason: null, network: false, envAllow: [] });
    expect(decide([], 'auto-edit', call('write_file', 'write')).rule).toBe('mode:auto-edit');
    expect(decide([], 'full-auto', call('run', 'execute')).rule).toBe('mode:full-auto');
    expect(decide([], 'ask', call('write_file', 'write')).reason).toContain('write_file changes workspace files');
    expect(decide([], 'full-auto', call('fetch', 'network'))).toMatchObject({ rule: 'default:network', reason: expect.stringContaining('do not retry') });
    expect(decide([], 'deny-all', call('write_file', 'write'))).toMatchObject({
      decision: 'deny',
      rule: 'mode:deny-all',
      reason: expect.stringContaining('run mode deny-all: nobody to ask'),
    });
  });
});

describe('config rules', () => {
  it('lets explicit rules win over the mode', () => {
    expect(decide(rules({ tool: 'write_file', decision: 'ask' }), 'full-auto', call('write_file', 'write')).decision).toBe('ask');
    expect(decide(rules({ tool: 'fetch', decision: 'allow' }), 'ask', call('fetch', 'network')).decision).toBe('allow');
    expect(decide(rules({ level: 'read', decision: 'deny' }), 'full-auto', call('read_file', 'read')).decision).toBe('deny');
  });

  it('matches tool names with * globs and lists', () => {
    const r = rules({ tool: ['mcp_*', 'fetch'], decision: 'deny', id: 'no-remote' });
    expect(decide(r, 'ask', call('mcp_github', 'read'))).toMatchObject({ decision: 'deny', rule: 'config:no-remote' });
    expect(decide(r, 'ask', call('fetch', 'read')).decision).toBe('deny');
    expect(decide(r, 'ask', call('read_file', 'read')).decision).toBe('allow');
  });

  it('lets deny beat ask beat allow, whatever the order', () => {
    const r = rules({ tool: '*', decision: 'allow' }, { tool: 'write_file', decision: 'ask' }, { tool: 'write_file', decision: 'deny', reason: 'read-only run' });
    expect(decide(r, 'ask', call('write_file', 'write'))).toMatchObject({
      decision: 'deny',
      rule: 'config:3',
      reason: 'denied by policy rule 3 (read-only run); do not retry this call',
    });
    expect(decide(r.slice(0, 2), 'ask', call('write_file', 'write'))).toMatchObject({ decision: 'ask', rule: 'config:2' });
    expect(decide(r.slice(0, 1), 'ask', call('write_file', 'write'))).toMatchObject({ decision: 'allow', rule: 'config:1' });
  });

  it('says what a deny rule without a reason matched', () => {
    const d = decide(rules({ command: ['git', 'push'], decision: 'deny' }), 'ask', sh('git push'));
    expect(d.reason).toBe('denied by policy rule 1 (command "git push"); do not retry this command');
  });

  it('matches paths: any touched path for deny, every touched path for allow, none never', () => {
    const deny = rules({ paths: ['**/.env', 'secrets/**'], decision: 'deny' });
    const write = (...paths: string[]): PolicyFacts => call('write_file', 'write', { plan: plan('write_file', paths) });
    expect(decide(deny, 'full-auto', write('src/a.ts', 'app/.env')).decision).toBe('deny');
    expect(decide(deny, 'full-auto', write('secrets/.key')).decision).toBe('deny');
    expect(decide(deny, 'full-auto', write('src/a.ts')).decision).toBe('allow');

    const allow = rules({ paths: ['src/**'], decision: 'allow' });
    expect(decide(allow, 'ask', write('src/a.ts', 'src/deep/b.ts')).decision).toBe('allow');
    expect(decide(allow, 'ask', write('src/a.ts', 'README.md')).decision).toBe('ask');
    expect(decide(allow, 'ask', call('shell', 'execute', { shell: parseShellCommand('curl x') })).decision).toBe('ask');
  });

  it('matches untrusted_context only when the step read untrusted content', () => {
    const r = rules({ tool: 'shell', untrusted_context: true, decision: 'deny', reason: 'the step read untrusted content' });
    expect(decide(r, 'full-auto', sh('ls', { untrustedContext: true }))).toMatchObject({ decision: 'deny', rule: 'config:1' });
    expect(decide(r, 'full-auto', sh('ls', { untrustedContext: false })).decision).toBe('allow');
  });

  it('never matches a command rule against a non-shell tool', () => {
    const r = rules({ command: 'rm', decision: 'deny' }, { command: 'cat', decision: 'allow' });
    expect(decide(r, 'ask', call('write_file', 'write')).decision).toBe('ask');
    expect(decide(r, 'ask', call('read_file', 'read')).rule).toBe('default:read');
  });
});

describe('protected paths: .git and the workspace config', () => {
  const write = (tool: string, ...paths: string[]): PolicyFacts => call(tool, 'write', { plan: plan(tool, paths) });

  it('denies a write inside any .git, and to actorloop.toml, in every mode, naming the rule a user would add', () => {
    for (const mode of MODES) {
      for (const p of ['.git/config', '.git/info/attributes', '.git', 'vendor/lib/.git/hooks/post-checkout', '.GIT/config']) {
        expect(decide([], mode, write('write_file', p)), `${mode} ${p}`).toMatchObject({ decision: 'deny', rule: 'protected:.git' });
      }
      expect(decide([], mode, write('apply_patch', 'src/a.ts', 'actorloop.toml'))).toMatchObject({ decision: 'deny', rule: 'protected:actorloop.toml' });
    }
    expect(decide([], 'full-auto', write('write_file', '.git/config')).reason).toMatch(
      /\.git\/config is inside \.git\/, which the runtime protects .*tool = "write_file", paths = \[".git\/\*\*"\], decision = "allow".*do not retry/,
    );
    // reading is not writing, and names that only look alike are plain files
    expect(decide([], 'ask', call('read_file', 'read', { plan: plan('read_file', ['.git/config'], 'read') })).decision).toBe('allow');
    for (const p of ['.gitignore', '.github/workflows/ci.yml', 'src/.gitkeep', 'docs/actorloop.toml']) {
      expect(decide([], 'auto-edit', write('write_file', p)).decision, p).toBe('allow');
    }
  });

  it('lets an allow rule that names the path through, and no broader one; a deny rule still wins', () => {
    const named = rules({ tool: 'write_file', paths: ['.git/**'], decision: 'allow' });
    expect(decide(named, 'ask', write('write_file', '.git/info/exclude'))).toMatchObject({ decision: 'allow', rule: 'config:1' });
    // the rule names .git/**, not the nested repository's, nor another tool
    expect(decide(named, 'ask', write('write_file', 'sub/.git/config')).rule).toBe('protected:.git');
    expect(decide(named, 'ask', write('apply_patch', '.git/config')).rule).toBe('protected:.git');
    for (const broad of [['**'], ['*'], ['**/*']]) {
      const r = rules({ paths: broad, decision: 'allow' });
      expect(decide(r, 'full-auto', write('write_file', '.git/config')).rule, broad[0]).toBe('protected:.git');
    }
    expect(decide(rules({ paths: ['actorloop.toml'], decision: 'allow' }), 'ask', write('write_file', 'actorloop.toml')).decision).toBe('allow');
    const denied = rules({ tool: 'write_file', paths: ['.git/**'], decision: 'allow' }, { paths: ['.git/hooks/**'], decision: 'deny' });
    expect(decide(denied, 'full-auto', write('write_file', '.git/hooks/pre-commit')).rule).toBe('config:2');
  });
});

describe('shell commands', () => {
  it('denies what cannot be parsed or chains too many commands, before any rule', () => {
    const allowAll = rules({ tool: '*', decision: 'allow' });
    expect(decide(allowAll, 'full-auto', sh('echo "x'))).toMatchObject({
      decision: 'deny',
      rule: 'shell:unparseable',
      reason: expect.stringContaining('reached EOF without closing quote'),
    });
    const many = Array.from({ length: 17 }, (_, i) => `echo ${i}`).join('; ');
    expect(decide(allowAll, 'full-auto', sh(many))).toMatchObject({
      decision: 'deny',
      rule: 'shell:too-many-commands',
      reason: expect.stringContaining('chains 17 commands'),
    });
  });

  it('denies a program whose name is only known at run time', () => {
    const allowAll = rules({ tool: '*', decision: 'allow' });
    expect(decide(allowAll, 'full-auto', sh('$CMD --force'))).toMatchObject({
      decision: 'deny',
      rule: 'shell:dynamic-program',
      reason: expect.stringContaining('cannot tell which program runs'),
    });
    expect(decide(allowAll, 'full-auto', sh('bash -c "$SCRIPT"')).rule).toBe('shell:dynamic-program');
  });

  it('allows every subcommand under a program prefix', () => {
    const r = rules({ command: 'git', decision: 'allow' });
    for (const cmd of ['git status', 'git log --oneline | git stash list', '/usr/bin/git diff']) {
      expect(decide(r, 'ask', sh(cmd))).toMatchObject({ decision: 'allow', rule: 'config:1' });
    }
    expect(decide(r, 'ask', sh('gitk')).decision).toBe('ask');
  });

  it('allows a chain only when every simple command is allowed by some rule', () => {
    const r = rules({ command: 'git status', decision: 'allow' }, { command: [['ls'], ['wc', '-l']], decision: 'allow' });
    expect(decide(r, 'ask', sh('git status && ls | wc -l')).decision).toBe('allow');
    expect(decide(r, 'ask', sh('git status && rm -rf /')).decision).toBe('ask');
    expect(decide(r, 'ask', sh('git status $(rm -rf /)')).decision).toBe('ask');
    expect(decide(r, 'ask', sh('git $SUB')).decision).toBe('ask');
    expect(decide(r, 'ask', sh('# only a comment')).decision).toBe('ask');
  });

  it('asks for a privileged run unless its wrapper is allowed too', () => {
    const r = rules({ command: 'git status', decision: 'allow' });
    expect(decide(r, 'ask', sh('timeout 5 git status')).decision).toBe('allow');
    expect(decide(r, 'ask', sh('sudo git status')).decision).toBe('ask');
    expect(decide([...r, ...rules({ command: 'sudo', decision: 'allow' })], 'ask', sh('sudo git status')).decision).toBe('allow');
    expect(decide(rules({ command: 'sudo', decision: 'deny' }), 'full-auto', sh('sudo -u x ls')).decision).toBe('deny');
  });

  const evasions = [
    'git push',
    'env X=1 git push',
    'env -i git push origin main',
    "env 'A%=1' git push",
    'sh -c "git push"',
    "bash -lc 'git push'",
    '/usr/bin/git push',
    '\\git push',
    "'git' push",
    "$'\\x67it' push",
    'X=1 git push',
    'timeout 5 git push',
    'nohup git push &',
    'nice -n 5 git push',
    'command git push',
    'exec git push',
    'sudo git push',
    'echo push | xargs git',
    `sh -c "bash -c 'git push'"`,
    'eval "git push"',
    'git -C /tmp --no-pager push',
    'git $SUB',
    'ls && git push',
    'echo $(git push)',
    'find . -exec git push \\;',
  ];
  it.each(evasions)('a deny rule on "git push" still denies %s', (cmd) => {
    const d = decide([...noPush, ...rules({ tool: '*', decision: 'allow' })], 'full-auto', sh(cmd));
    expect(d).toMatchObject({ decision: 'deny', rule: 'config:1', reason: 'denied by policy rule 1 (git push is not allowed here); do not retry this command' });
  });

  it.each(['rm -rf /', 'env X=1 rm -rf /', 'sh -c "rm -rf /"', '/bin/rm x', '\\rm x', 'xargs rm', 'busybox rm x', 'rm *'])(
    'a deny rule on "rm" still denies %s',
    (cmd) => {
      expect(decide(rules({ command: 'rm', decision: 'deny' }), 'full-auto', sh(cmd)).decision).toBe('deny');
    },
  );

  it('does not deny what only looks like the denied command', () => {
    for (const cmd of ['git status', 'git log --grep push', 'echo git push', 'git commit -m "push later"']) {
      expect(decide(noPush, 'full-auto', sh(cmd)).decision).toBe('allow');
    }
  });
});

describe('opaque commands fail closed while a deny rule could match them', () => {
  const noSudo = rules({ tool: 'shell', command: 'sudo', decision: 'deny', reason: 'no sudo here' });
  const allowAll = rules({ tool: '*', decision: 'allow' });
  const ruleReason = 'denied by policy rule 1 (no sudo here); do not retry this command';

  // Wrappers whose inner command can be found: the sudo rule itself matches, with its reason.
  const seenThrough = [
    'chroot / sudo id',
    'chroot --userspec=1:1 /srv sudo id',
    "script -qc 'sudo id' /dev/null",
    "script /dev/null -q --command='sudo id'",
    'dbus-launch sudo id',
    'dbus-launch --exit-with-session sudo id',
    "git -c alias.x='!sudo id' x",
    "git -C . -c alias.x='!f() { sudo id; }; f' x",
    "git rebase -x 'sudo id' HEAD~2",
    'git bisect run sudo id',
    "git submodule foreach 'sudo id'",
    'echo id | xargs sudo',
    'find . -exec sudo id \\;',
    'nohup sudo id',
    'timeout 5 sudo id',
    'nice -n 5 sudo id',
    'setsid sudo id',
    'flock /tmp/l sudo id',
    "flock -w 3 /tmp/l -c 'sudo id'",
    'env -i sudo id',
    'exec sudo id',
    "bash -c 'source <(echo) ; sudo id'",
  ];
  it.each(seenThrough)('the sudo rule denies %s in every mode', (cmd) => {
    for (const mode of MODES) {
      expect(decide([...noSudo, ...allowAll], mode, sh(cmd)), mode).toMatchObject({ decision: 'deny', rule: 'config:1', reason: ruleReason });
    }
  });

  // Commands whose real work the parser cannot see: ask where a person answers, deny where none does.
  const opaque = [
    'bash run.sh',
    'sh run.sh',
    'zsh run.sh',
    'dash run.sh',
    'ksh -e run.sh',
    'fish run.fish',
    'fish -c "sudo id"',
    'source run.sh',
    '. ./run.sh',
    './run.sh',
    'chmod +x run.sh && ./run.sh',
    'timeout 5 bash run.sh',
    'python3 -c "import os; os.system(\'sudo id\')"',
    "python -c 'import os'",
    "python3.12 -Sc 'import os'",
    'echo "import os" | python3',
    "perl -e 'system(\"sudo id\")'",
    "perl -E 'say 1'",
    "perl -lne 'print' f",
    "node -e 'require(\"child_process\").execSync(\"sudo id\")'",
    "node -p '1'",
    "node --eval '1'",
    "node --input-type=module -e '1'",
    "ruby -e 'system(\"sudo id\")'",
    "php -r 'system(\"sudo id\");'",
    "lua -e 'os.execute(\"sudo id\")'",
    "deno eval 'Deno.exit()'",
    "osascript -e 'do shell script \"sudo id\"'",
    'tclsh < x.tcl',
    "awk 'BEGIN{system(\"sudo id\")}'",
    "gawk 'BEGIN { print \"id\" | \"sudo sh\" }'",
    "mawk -v c='sudo id' 'BEGIN { while ((c | getline l) > 0) print l }'",
    "git -c core.pager='sudo id' log",
    "git -c core.sshCommand='sudo ssh' fetch",
    'git --config-env=alias.x=CMD x',
    'strace -f sudo id',
    'unshare -r sudo id',
    "tmux new-session -d 'sudo id'",
    "sed -n '1e sudo id' /dev/null",
    'BASH_ENV=run.sh bash -c true',
    "env NODE_OPTIONS='--require ./x.js' node -v",
  ];
  it.each(opaque)('%s: denied in full-auto and deny-all, asked about in ask and auto-edit', (cmd) => {
    const r = [...noSudo, ...allowAll];
    expect(decide(r, 'full-auto', sh(cmd))).toMatchObject({
      decision: 'deny',
      rule: 'shell:opaque',
      reason: expect.stringMatching(/policy rule 1 \(no sudo here\) may match a command it runs; run mode full-auto asks nobody, so it is denied/),
    });
    expect(decide(r, 'deny-all', sh(cmd))).toMatchObject({ decision: 'deny', rule: 'mode:deny-all', reason: expect.stringContaining('no sudo here') });
    for (const mode of ['ask', 'auto-edit'] as const) {
      expect(decide(r, mode, sh(cmd)), mode).toMatchObject({ decision: 'ask', rule: 'shell:opaque', reason: expect.stringContaining('so it needs approval') });
    }
    // without bubblewrap too: the denial does not become the no-sandbox question
    expect(decide(noSudo, 'full-auto', sh(cmd, { sandboxed: false }))).toMatchObject({ decision: 'deny', rule: 'shell:opaque' });
  });

  it('says what it could not see and what to do instead', () => {
    expect(decide(noSudo, 'full-auto', sh('bash run.sh')).reason).toBe(
      '"bash run.sh" runs the shell script run.sh, whose commands the policy cannot see, and policy rule 1 (no sudo here) may match a command it runs; ' +
        'run mode full-auto asks nobody, so it is denied — run those commands directly, where the policy can check them, instead of retrying this command',
    );
  });

  it('still allows ordinary commands in full-auto with the rule present', () => {
    const ordinary = [
      'ls', 'git status', 'rg foo', 'cat a.txt', 'timeout 5 ls', 'nice -n 5 make', 'npm test', 'make', 'npx vitest run', 'python3 -m pytest',
      'python3 x.py', 'node build.js', 'node --version', "awk '{print $1}' a.txt", "awk -F'|' '{ print $2 }' a.txt", 'bash -n run.sh',
      'git -c user.name=x commit -m y', "find . -name '*.ts' -exec wc -l {} +", "script -qc 'ls' /dev/null", 'flock /tmp/l ls',
    ];
    for (const cmd of ordinary) expect(decide(noSudo, 'full-auto', sh(cmd)), cmd).toMatchObject({ decision: 'allow', rule: 'mode:full-auto' });
  });

  it('lets opaque commands follow the mode when no rule with a command could match them', () => {
    expect(decide([], 'full-auto', sh('bash run.sh'))).toMatchObject({ decision: 'allow', rule: 'mode:full-auto' });
    expect(decide(allowAll, 'ask', sh('python3 -c "import os"'))).toMatchObject({ decision: 'allow', rule: 'config:1' });
    expect(decide([], 'ask', sh('source run.sh'))).toMatchObject({ decision: 'ask', rule: 'default:execute' });
    // rules that cannot apply to this call: another tool, another level, paths only, untrusted content only
    const others = rules(
      { tool: 'mcp_*', command: 'sudo', decision: 'deny' },
      { level: 'network', command: 'sudo', decision: 'deny' },
      { paths: ['secrets/**'], decision: 'deny' },
      { untrusted_context: true, command: 'sudo', decision: 'deny' },
    );
    expect(decide(others, 'full-auto', sh('bash run.sh'))).toMatchObject({ decision: 'allow', rule: 'mode:full-auto' });
    expect(decide(others, 'full-auto', sh('bash run.sh', { untrustedContext: true }))).toMatchObject({ decision: 'deny', rule: 'shell:opaque' });
  });

  it('fails closed under an ask rule too, and compares no paths, which an opaque command does not show', () => {
    const askPublish = rules({ command: 'npm publish', decision: 'ask' });
    expect(decide(askPublish, 'full-auto', sh('bash release.sh'))).toMatchObject({ decision: 'deny', rule: 'shell:opaque' });
    expect(decide(askPublish, 'auto-edit', sh('bash release.sh'))).toMatchObject({ decision: 'ask', rule: 'shell:opaque' });
    // an ask rule that matches the command itself still asks, in full-auto too
    expect(decide(rules({ command: 'bash', decision: 'ask' }), 'full-auto', sh('bash release.sh'))).toMatchObject({ decision: 'ask', rule: 'config:1' });
    const scoped = rules({ command: 'rm', paths: ['secrets/**'], decision: 'deny' });
    expect(decide(scoped, 'full-auto', sh('bash clean.sh'))).toMatchObject({ decision: 'deny', rule: 'shell:opaque' });
  });
});

describe('sandbox and network', () => {
  it('asks for shell without bubblewrap, over allow rules and full-auto', () => {
    const unsandboxed = (cmd: string): PolicyFacts => sh(cmd, { sandboxed: false });
    const expected = { decision: 'ask', rule: 'shell:no-sandbox', reason: NO_SANDBOX_REASON, network: false, envAllow: [] };
    expect(decide([], 'full-auto', unsandboxed('ls'))).toEqual(expected);
    expect(decide(rules({ command: 'ls', decision: 'allow', network: true }), 'ask', unsandboxed('ls'))).toEqual(expected);
    expect(decide(rules({ tool: 'shell', decision: 'allow' }), 'auto-edit', unsandboxed('ls'))).toEqual(expected);
    // A deny stays a deny; deny-all has nobody to ask.
    expect(decide(noPush, 'full-auto', unsandboxed('git push')).decision).toBe('deny');
    expect(decide(rules({ command: 'ls', decision: 'allow' }), 'deny-all', unsandboxed('ls'))).toMatchObject({
      decision: 'deny',
      rule: 'mode:deny-all',
      reason: expect.stringContaining('bubblewrap is not installed'),
    });
  });

  it('denies every ask in deny-all mode, from rules and defaults alike', () => {
    const r = rules({ command: 'npm publish', decision: 'ask' }, { command: 'ls', decision: 'allow' });
    expect(decide(r, 'deny-all', sh('npm publish'))).toMatchObject({ decision: 'deny', rule: 'mode:deny-all' });
    expect(decide(r, 'deny-all', sh('make'))).toMatchObject({ decision: 'deny', rule: 'mode:deny-all' });
    expect(decide(r, 'deny-all', sh('ls')).decision).toBe('allow');
    expect(decide(r, 'deny-all', call('read_file', 'read')).decision).toBe('allow');
  });

  it('grants network and secret env names only through matching allow rules of an allowed call', () => {
    const r = rules(
      { command: 'npm install', decision: 'allow', network: true, env_allow: ['NPM_TOKEN'] },
      { command: 'ls', decision: 'allow', env_allow: ['LS_COLORS_KEY'] },
      { command: 'curl', decision: 'allow' },
    );
    expect(decide(r, 'ask', sh('npm install && ls'))).toMatchObject({ decision: 'allow', network: true, envAllow: ['LS_COLORS_KEY', 'NPM_TOKEN'] });
    expect(decide(r, 'ask', sh('ls'))).toMatchObject({ decision: 'allow', network: false, envAllow: ['LS_COLORS_KEY'] });
    expect(decide(r, 'ask', sh('curl example.com'))).toMatchObject({ decision: 'allow', network: false, envAllow: [] });
    expect(decide(r, 'ask', sh('npm install && rm x'))).toMatchObject({ decision: 'ask', network: false, envAllow: [] });
    expect(decide([], 'full-auto', sh('npm install')).network).toBe(false);
  });
});

describe('PolicyRuleSchema', () => {
  const error = (raw: unknown): string => {
    const r = PolicyRuleSchema.safeParse(raw);
    if (r.success) throw new Error('expected a validation error');
    return r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
  };

  it('accepts every command form', () => {
    expect(PolicyRuleSchema.parse({ command: 'git push', decision: 'deny' }).command).toBe('git push');
    expect(PolicyRuleSchema.parse({ command: ['git', 'push'], decision: 'deny' }).command).toEqual(['git', 'push']);
    expect(PolicyRuleSchema.parse({ command: [['git', 'push'], ['rm']], decision: 'deny' }).command).toEqual([['git', 'push'], ['rm']]);
  });

  it('refuses mistakes with a path and a sentence', () => {
    expect(error({ decision: 'maybe' })).toBe('decision: decision must be "allow", "ask" or "deny"');
    expect(error({ decision: 'deny', tools: 'x' })).toContain('tools');
    expect(error({ command: ['git push', 'rm'], decision: 'deny' })).toContain('command.0: a list of strings is the words of one command');
    expect(error({ paths: ['/etc/**'], decision: 'deny' })).toContain('paths.0: paths are globs relative to the workspace root');
    expect(error({ command: 'curl', network: true, decision: 'deny' })).toContain('network: network and env_allow');
    expect(error({ level: 'admin', decision: 'deny' })).toContain('level');
    expect(error({ command: 5, decision: 'deny' })).toContain('command: a command prefix');
  });
});

describe('plans', () => {
  const base: ExecutionPlan = { tool: 'shell', version: '1', commands: [['git', 'status']], command: 'git status', cwd: '.', paths: [], network: false };

  it('digests canonical JSON: stable under key order, changed by a changed argv', () => {
    const reordered = { network: false, paths: [], cwd: '.', command: 'git status', commands: [['git', 'status']], version: '1', tool: 'shell' };
    expect(planDigest(base)).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(planDigest(reordered)).toBe(planDigest(base));
    expect(planDigest({ ...base, commands: [['git', 'push']] })).not.toBe(planDigest(base));
  });

  it('builds a default plan from the input and the path resources', () => {
    const p = defaultPlan(
      { name: 'write_file', version: '2' },
      { path: 'src/a.ts', content: 'x' },
      [
        { key: 'path:/ws/src/a.ts', mode: 'write' },
        { key: 'path:/ws/src/a.ts', mode: 'write' },
        { key: 'path:/ws', mode: 'read' },
        { key: 'process', mode: 'write' },
      ],
      '/ws',
    );
    expect(p).toEqual({
      tool: 'write_file',
      version: '2',
      paths: [
        { path: 'src/a.ts', mode: 'write' },
        { path: '.', mode: 'read' },
      ],
      network: false,
      input: { path: 'src/a.ts', content: 'x' },
    });
  });
});
