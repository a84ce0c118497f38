import { describe, expect, it } from 'vitest';
import {
  commandMayMatch,
  commandPrefixMatches,
  commandSurelyMatches,
  MAX_CHAINED_COMMANDS,
  parseShellCommand,
  type ParsedCommand,
  type ShellWord,
  type SimpleCommand,
} from '../../src/tools/shell-command.js';
import { XARGS_INPUT } from '../../src/tools/shell-wrappers.js';

function parsed(command: string): Extract<ParsedCommand, { ok: true }> {
  const r = parseShellCommand(command);
  if (!r.ok) throw new Error(`expected ${command} to parse: ${r.reason}`);
  return r;
}
const argvs = (command: string): string[][] => parsed(command).commands.map((c) => c.argv);
const programs = (command: string): string[] => parsed(command).commands.map((c) => c.program);
const only = (command: string): SimpleCommand => {
  const cmds = parsed(command).commands;
  expect(cmds).toHaveLength(1);
  return cmds[0]!;
};
function refusal(command: string): string {
  const r = parseShellCommand(command);
  if (r.ok) throw new Error(`expected ${command} to be refused`);
  return r.reason;
}
const chain = (n: number, sep = ' && '): string => Array.from({ length: n }, (_, i) => `echo ${i}`).join(sep);
const statics = (...texts: string[]): ShellWord[] => texts.map((text) => ({ text, kind: 'static' }));

describe('parseShellCommand: every simple command counts', () => {
  it('finds commands in pipelines, chains, background jobs, groups and compound commands', () => {
    expect(programs('a | b | c; d && e || f & (g; h); { i; }')).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']);
    expect(programs('if a; then b; elif c; then d; else e; fi')).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(programs('while a; do b; done; for x in 1 2; do c "$x"; done; case $y in z) d;; esac')).toEqual(['a', 'b', 'c', 'd']);
    expect(programs('f() { rm -rf x; }; f')).toEqual(['rm', 'f']);
    expect(programs('time git push; ! git fetch')).toEqual(['git', 'git']);
  });

  it('finds commands inside substitutions, backticks, process substitution, assignments and here-docs', () => {
    expect(programs('echo $(date) `whoami`')).toEqual(['echo', 'date', 'whoami']);
    expect(programs('diff <(ls a) >(cat)')).toEqual(['diff', 'ls', 'cat']);
    expect(programs('X=$(rm -rf y)')).toEqual(['rm']);
    expect(programs('echo "${A:-$(curl x)}" $((1 + $(wc -l < f)))')).toEqual(['echo', 'curl', 'wc']);
    expect(programs('cat <<EOF\n$(rm z)\nEOF\n')).toEqual(['cat', 'rm']);
    expect(programs("cat <<'EOF'\n$(rm z)\nEOF\n")).toEqual(['cat']);
  });

  it(`allows ${MAX_CHAINED_COMMANDS} commands and refuses ${MAX_CHAINED_COMMANDS + 1}, wherever they hide`, () => {
    expect(parsed(chain(16)).commands).toHaveLength(16);
    expect(refusal(chain(17))).toBe('the command chains 17 commands; at most 16 are allowed — split it into several calls');
    expect(refusal(`${chain(9, ' | ')}; echo $(${chain(7, '; ')})`)).toContain('chains 17 commands');
  });

  it('counts the commands of nested scripts in place of the wrapper', () => {
    expect(refusal(`${chain(15)} && bash -c 'a; b'`)).toContain('chains 17 commands');
    expect(parsed(`${chain(14)} && bash -c 'a; b'`).commands).toHaveLength(16);
  });
});

describe('parseShellCommand: refusals say why', () => {
  it('refuses an unterminated quote', () => {
    expect(refusal('echo "abc')).toBe('the command could not be parsed: reached EOF without closing quote " (line 1, column 6)');
    expect(refusal("echo 'abc")).toContain("reached EOF without closing quote '");
  });

  it('refuses an unclosed substitution and an if without fi', () => {
    expect(refusal('echo $(ls')).toContain('the command could not be parsed: reached EOF without matching ( with )');
    expect(refusal('if true; then echo x')).toContain('if statement must end with "fi"');
  });

  it('names the inner script when the syntax error is inside sh -c', () => {
    expect(refusal(`sh -c 'echo "x'`)).toContain('of the script given to sh -c');
  });

  it('refuses scripts nested too deep', () => {
    let cmd = 'echo x';
    for (let i = 0; i < 10; i++) cmd = `eval ${JSON.stringify(cmd).replace(/\$/g, '\\$')}`;
    expect(parseShellCommand(cmd)).toMatchObject({ ok: false, code: 'too-deep' });
  });
});

describe('parseShellCommand: wrappers are seen through', () => {
  it.each([
    ['env X=1 rm -rf /', ['rm', '-rf', '/']],
    ['env -i -u HOME X=1 Y=2 rm -rf /', ['rm', '-rf', '/']],
    ['env -S "git push"', ['git', 'push']],
    ['sh -c "rm -rf /"', ['rm', '-rf', '/']],
    ["bash -lc 'git push'", ['git', 'push']],
    ["bash -e -o pipefail -c 'git push' name arg", ['git', 'push']],
    ['/usr/bin/git push', ['/usr/bin/git', 'push']],
    ['\\git push', ['git', 'push']],
    ["'git' \"push\"", ['git', 'push']],
    ["$'\\x67it' push", ['git', 'push']],
    ['X=1 git push', ['git', 'push']],
    ['timeout 5 git push', ['git', 'push']],
    ['timeout -s KILL --kill 3 5s git push', ['git', 'push']],
    ['nohup git push &', ['git', 'push']],
    ['nice -n 10 git push', ['git', 'push']],
    ['stdbuf -oL git push', ['git', 'push']],
    ['command git push', ['git', 'push']],
    ['exec git push', ['git', 'push']],
    ['/usr/bin/time -f %e git push', ['git', 'push']],
    ['busybox rm -rf x', ['rm', '-rf', 'x']],
    ['xargs rm', ['rm', XARGS_INPUT]],
    ['xargs -0 -n 1 rm -f', ['rm', '-f', XARGS_INPUT]],
    ['xargs -I{} git {}', ['git', '{}']],
    [`sh -c "bash -c 'git push'"`, ['git', 'push']],
    ['eval "git push"', ['git', 'push']],
    ['eval git push', ['git', 'push']],
    ['watch -n 1 git status', ['git', 'status']],
    ["su -c 'git push' root", ['git', 'push']],
    ["trap 'git push' EXIT", ['git', 'push']],
    ["alias p='git push'", ['git', 'push']],
    ['chroot / git push', ['git', 'push']],
    ['chroot --userspec 1:1 --groups=2 /srv git push', ['git', 'push']],
    ['dbus-launch --exit-with-session git push', ['git', 'push']],
    ['flock -w 5 /tmp/lock git push', ['git', 'push']],
    ["flock /tmp/lock -c 'git push'", ['git', 'push']],
    ["script -qc 'git push' /dev/null", ['git', 'push']],
    ["script -qfec 'git push' /dev/null", ['git', 'push']],
    ["script /dev/null --command 'git push'", ['git', 'push']],
    ['setsid -f git push', ['git', 'push']],
  ])('%s runs %j', (command, argv) => {
    const c = only(command);
    expect(c.argv).toEqual(argv);
    expect(c.dynamicProgram).toBe(false);
    expect(c.program).toBe(argv[0]!.split('/').pop());
  });

  it('keeps sudo visible as a privileged wrapper of the command it runs', () => {
    const c = only('sudo -u root -E git push');
    expect(c.argv).toEqual(['git', 'push']);
    expect(c.wrappers).toEqual([{ words: statics('sudo', '-u', 'root', '-E', 'git', 'push'), privileged: true }]);
    expect(only('sudo sh -c "git push"').wrappers.map((w) => [w.words[0]!.text, w.privileged])).toEqual([
      ['sudo', true],
      ['sh', false],
    ]);
  });

  it('keeps a wrapper with nothing to run as the program', () => {
    expect(only('env').program).toBe('env');
    expect(only('sudo -l').program).toBe('sudo');
    expect(only('command -v git').program).toBe('command');
    expect(only('bash script.sh').program).toBe('bash');
  });

  it('adds what git config and git subcommands run', () => {
    // git hands a `!` alias to the shell: its sudo stays visible as a wrapper
    expect(argvs("git -c alias.x='!sudo id' x")).toEqual([['git', '-c', 'alias.x=!sudo id', 'x'], ['id']]);
    expect(parsed("git -c alias.x='!sudo id' x").commands[1]!.wrappers.map((w) => w.words[0]!.text)).toEqual(['git', 'sudo']);
    expect(argvs('git -c alias.p=push p origin')).toEqual([['git', '-c', 'alias.p=push', 'p', 'origin'], ['git', 'push']]);
    expect(argvs("git rebase --exec 'make test' main")).toEqual([['git', 'rebase', '--exec', 'make test', 'main'], ['make', 'test']]);
    expect(argvs('git bisect run npm test')).toEqual([['git', 'bisect', 'run', 'npm', 'test'], ['npm', 'test']]);
    expect(argvs("git submodule foreach --recursive 'git pull'")).toEqual([['git', 'submodule', 'foreach', '--recursive', 'git pull'], ['git', 'pull']]);
  });

  it('refuses a wrapper that would start a shell reading stdin', () => {
    expect(only('chroot /srv').dynamicProgram).toBe(true);
    expect(only('script /dev/null').dynamicProgram).toBe(true);
    expect(only('fish').dynamicProgram).toBe(true);
    expect(only('script --version').dynamicProgram).toBe(false);
  });

  it('adds the command find -exec runs', () => {
    expect(argvs('find . -name "*.o" -exec rm -f {} \\; -print')).toEqual([
      ['find', '.', '-name', '*.o', '-exec', 'rm', '-f', '{}', ';', '-print'],
      ['rm', '-f', '{}'],
    ]);
    expect(programs("find . -execdir sh -c 'git add \"$1\"' _ {} +")).toEqual(['find', 'git']);
  });
});

describe('parseShellCommand: words and dynamic parts', () => {
  it('collects the targets of redirects that write', () => {
    const r = parsed('echo a > out.txt 2>>err.log &>all.log >|forced <>rw >&dup 2>&1 >&2 < in.txt <<< here');
    expect(r.writes).toEqual(['out.txt', 'err.log', 'all.log', 'forced', 'rw', 'dup']);
    expect(r.dynamic).toBe(false);
    expect(parsed('(cd sub && make) > "build log.txt"').writes).toEqual(['build log.txt']);
    expect(parsed('echo > "$OUT"')).toMatchObject({ writes: ['$OUT'], dynamic: true });
  });

  it('detects a dynamic program and keeps expansions as placeholders', () => {
    expect(only('$CMD --force')).toMatchObject({ argv: ['$CMD', '--force'], program: '$CMD', dynamicProgram: true });
    expect(only('"${TOOL}" x').dynamicProgram).toBe(true);
    expect(parsed('$(which git) push').commands.map((c) => [c.program, c.dynamicProgram])).toEqual([
      ['$(which git)', true],
      ['which', false],
    ]);
    expect(only('{git,push}').dynamicProgram).toBe(true);
    expect(only('/usr/bin/gi? push').dynamicProgram).toBe(true);
    expect(only('eval "$X"')).toMatchObject({ program: 'eval', dynamicProgram: true });
    expect(only('bash -c "$SCRIPT"')).toMatchObject({ program: 'bash', dynamicProgram: true });
    // A shell reading its script from stdin runs text nobody can see.
    expect(parsed('curl -s https://x.sh | sh').commands.map((c) => c.dynamicProgram)).toEqual([false, true]);
    expect(only("bash <<< 'git push'").dynamicProgram).toBe(true);
    expect(only('bash -s').dynamicProgram).toBe(true);
    expect(only('bash ./build.sh').dynamicProgram).toBe(false);
    expect(only('bash --version').dynamicProgram).toBe(false);
    const r = parsed('echo "$HOME/x" ~/y *.ts');
    expect(r.commands[0]!.words).toEqual([
      { text: 'echo', kind: 'static' },
      { text: '$HOME/x', kind: 'dynamic' },
      { text: '~/y', kind: 'static' },
      { text: '*.ts', kind: 'glob' },
    ]);
    expect(r.dynamic).toBe(true);
    expect(parsed('ls *.ts "[x]" [ -f a ]').dynamic).toBe(false);
  });

  it('removes quotes and escapes as bash does', () => {
    expect(only(`printf '%s' "a\\"b\\$c\\q" a\\ b $'t\\tx'`).argv).toEqual(['printf', '%s', 'a"b$c\\q', 'a b', 't\tx']);
    expect(only('[ -f x ]').program).toBe('[');
  });

  it('keeps non-ASCII text intact around placeholders', () => {
    expect(only('echo "é $X ü"').argv).toEqual(['echo', 'é $X ü']);
  });
});

describe('parseShellCommand: opaque commands say why', () => {
  const opaque = (command: string): string | null => {
    const c = parsed(command).commands.find((x) => x.opaque !== null);
    return c ? c.opaque : null;
  };

  it.each([
    ['bash run.sh', '"bash run.sh" runs the shell script run.sh, whose commands the policy cannot see'],
    ['bash -e -o pipefail run.sh arg', 'runs the shell script run.sh'],
    ['sh -c "bash run.sh"', 'runs the shell script run.sh'],
    ['source ./env.sh', '"source ./env.sh" runs the shell script ./env.sh in this shell'],
    ['. run.sh', 'runs the shell script run.sh in this shell'],
    ['./run.sh', '"./run.sh" runs the shell script ./run.sh'],
    ['exec scripts/deploy.bash', 'runs the shell script scripts/deploy.bash'],
    ['fish -c "ls"', 'runs fish code, whose syntax the policy does not parse'],
    ["python3 -c 'print(1)'", "\"python3 -c print(1)\" runs inline python3 code"],
    ["python -Ic 'print(1)'", 'runs inline python code'],
    ['/usr/bin/python3.12 -c x', 'runs inline python3.12 code'],
    ['python3', 'runs python3 code read from stdin'],
    ['python3 - < x.py', 'runs python3 code read from stdin'],
    ["perl -ne 'print' f", 'runs inline perl code'],
    ["node -pe '1'", 'runs inline node code'],
    ["node --eval='1'", 'runs inline node code'],
    ["bun -e '1'", 'runs inline bun code'],
    ["ruby -rjson -e '1'", 'runs inline ruby code'],
    ["php -r 'echo 1;'", 'runs inline php code'],
    ["lua5.4 -e 'x=1'", 'runs inline lua5.4 code'],
    ["pwsh -Command 'ls'", 'runs inline pwsh code'],
    ["Rscript -e 'system(\"id\")'", 'runs inline Rscript code'],
    ["awk 'BEGIN { system(\"id\") }'", 'runs an awk program that starts commands'],
    ["awk -e 'BEGIN { print | \"sh\" }'", 'runs an awk program that starts commands'],
    ["gawk -l ordchr 'BEGIN { print 1 }'", 'loads an awk extension'],
    ['awk "$PROG" f', 'runs an awk program only known at run time'],
    ['valgrind --tool=memcheck ./a.out', 'valgrind runs a command the policy cannot pick out of its options'],
    ["git -c core.editor='vim' commit", 'sets git config core.editor, which runs a command'],
    ['git -c credential.https://x.helper=store push', 'sets git config credential.https://x.helper'],
    ["git -c 'diff.x.textconv=cat' diff", 'sets git config diff.x.textconv'],
    ['git --exec-path=./bin x', 'runs git commands from ./bin'],
    ['git filter-branch --tree-filter "rm x" HEAD', 'runs filter commands'],
    ["sed -n '1e id' /dev/null", 'runs a sed script that executes commands (e)'],
    ["sed -E 's/.*/id/e' a.txt", 'runs a sed script that executes commands (e)'],
    ["sed -ne 's|x|id|ge' a.txt", 'runs a sed script that executes commands (e)'],
    ['sed "$S" a.txt', 'runs a sed script only known at run time'],
    ['BASH_ENV=run.sh bash -c true', 'BASH_ENV="run.sh" makes the programs it reaches run code the policy cannot see'],
    ['export BASH_ENV=run.sh; bash -c true', 'BASH_ENV="run.sh" makes'],
    ["env NODE_OPTIONS='--require ./x.js' npm test", 'NODE_OPTIONS="--require ./x.js" makes'],
    ["GIT_SSH_COMMAND='sudo ssh' git fetch", 'GIT_SSH_COMMAND="sudo ssh" makes'],
    ["env 'BASH_FUNC_ls%%=() { id; }' bash -c ls", 'BASH_FUNC_ls%%'],
  ])('%s is opaque', (command, why) => {
    expect(opaque(command)).toContain(why);
  });

  it.each([
    'ls -la', 'git status', 'rg foo', 'cat a.txt', 'timeout 5 ls', 'bash --version', 'bash -n run.sh', 'node --version', 'node build.js',
    'python3 -m pytest -q', 'python3 -mpytest', 'python3 manage.py test', 'python3 -V', 'perl script.pl', 'npm test', 'make -j4', 'npx vitest run',
    "awk '{ print $1 }' a.txt", "awk -F'|' -v OFS=, '{ print $2 }' a.txt", 'awk -f prog.awk a.txt', "awk '$1 == 1 || $2 == 2' a.txt",
    'git -c user.name=x -c color.ui=always commit -m y', 'git -c user.email="$EMAIL" commit', 'tmux -V', 'source', 'runme.shx',
    "sed -i 's/foo/bar/g' a.txt", "sed -n '1,5p' a.txt", "sed 's/e/E/g' a.txt", "sed -e 's/one/two/' -e '/^$/d' a.txt", "sed -n '/start/,/end/p' a.txt",
    "sed --sandbox 's/x/id/e' a.txt", 'sed -f edits.sed a.txt', 'GIT_EDITOR=true git rebase --continue', 'PAGER=cat git log', 'env git commit -m PAGER=x',
    'PATH="$PWD/bin:$PATH" make', 'X=1 ls',
  ])('%s is not opaque', (command) => {
    expect(opaque(command)).toBeNull();
  });
});

describe('command prefixes', () => {
  it('commandPrefixMatches compares the program by basename, unless the prefix is a path', () => {
    expect(commandPrefixMatches(['/usr/bin/git', 'push', 'origin'], ['git', 'push'])).toBe(true);
    expect(commandPrefixMatches(['git', 'pull'], ['git', 'push'])).toBe(false);
    expect(commandPrefixMatches(['git'], ['git', 'push'])).toBe(false);
    expect(commandPrefixMatches(['./git', 'push'], ['/usr/bin/git', 'push'])).toBe(false);
    expect(commandPrefixMatches(['/usr/bin/git', 'push'], ['/usr/bin/git'])).toBe(true);
  });

  it('commandSurelyMatches needs static words', () => {
    expect(commandSurelyMatches(only('git status -s').words, ['git', 'status'])).toBe(true);
    expect(commandSurelyMatches(only('git $SUB').words, ['git', 'status'])).toBe(false);
    expect(commandSurelyMatches(only('git statu?').words, ['git', 'status'])).toBe(false);
  });

  it('commandMayMatch sees through options, expansions and globs', () => {
    const may = (command: string, prefix: string): boolean => commandMayMatch(only(command).words, prefix.split(' '));
    expect(may('git -C /x --no-pager -c a=b push', 'git push')).toBe(true);
    expect(may('git $SUB origin', 'git push')).toBe(true);
    expect(may('git pu?h', 'git push')).toBe(true);
    expect(may('rm *', 'rm -rf')).toBe(true);
    expect(may('rm *.o', 'rm -rf')).toBe(false);
    expect(may('git log --grep push', 'git push')).toBe(false);
    expect(may('git status', 'git push')).toBe(false);
    expect(may('rm -v -rf x', 'rm -rf')).toBe(true);
  });
});
