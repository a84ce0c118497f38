import path from 'node:path';
import type { ShellWord } from './shell-words.js';

// Programs whose real work the command line does not show: an interpreter handed inline code
// (`python3 -c "os.system('sudo id')"`) or code on stdin, an awk program that runs commands, a
// program that is a shell script (`./run.sh`), and runners that start a command in a way too
// varied to unwrap (`strace -f sudo id`). What they run cannot be matched against deny rules, so
// the policy fails closed on them while a rule could have matched (policy.ts). Shell script files
// given to a shell (`bash f.sh`, `source f`, `. f`) are marked in shell-wrappers.ts, and wrappers
// that can be unwrapped (`chroot / sudo id`, `script -c`, `git -c alias.x='!…'`) are unwrapped there.
//
// Where the line is drawn: the command itself carries or selects the code (inline code, a script
// for a shell, stdin fed to an interpreter). A program that runs the project's own code — `npm
// test`, `make`, `pytest`, `node build.js`, `./a.out` — is no more visible to a static parser,
// but running that code is the command's whole point; treating them all as opaque would deny
// every test run in full-auto once any deny rule exists. For those the sandbox is the boundary
// (bubblewrap sets no_new_privs, so sudo inside it cannot raise anything), not the rule.

interface InterpreterSpec {
  /** Short options that carry the program text (`-c`, `-e`), also inside a cluster (`-ne`). */
  inline: string;
  /** Long options (or single-dash words, for pwsh) that carry it, compared lowercased. */
  inlineWords?: string[];
  /** Short options that take a value: a cluster ends at them (`-W error`, `-rjson`). */
  values?: string;
  /** Short options that name the program elsewhere (`python -m mod`), so it is not read from stdin. */
  module?: string;
  /** A first operand that is a subcommand taking inline code (`deno eval CODE`). */
  evalCommand?: string;
}

const PYTHON: InterpreterSpec = { inline: 'c', values: 'WXm', module: 'm' };
const NODE: InterpreterSpec = { inline: 'ep', inlineWords: ['--eval', '--print'], values: 'rC' };

const INTERPRETERS: Readonly<Record<string, InterpreterSpec>> = {
  node: NODE,
  nodejs: NODE,
  bun: { ...NODE, evalCommand: 'eval' },
  deno: { inline: '', evalCommand: 'eval' },
  // Perl's clusters mix flags and attached values (`-lne`, `-i.bak`): any e in one counts.
  perl: { inline: 'eE' },
  ruby: { inline: 'e', values: 'ICEFTWKrx0' },
  php: { inline: 'rRBE', values: 'cdzfFt' },
  lua: { inline: 'e', values: 'l' },
  luajit: { inline: 'e', values: 'lj' },
  expect: { inline: 'c' },
  tclsh: { inline: '' },
  wish: { inline: '' },
  osascript: { inline: 'e', values: 'ls' },
  Rscript: { inline: 'e' },
  R: { inline: 'e' },
  julia: { inline: 'eEp', inlineWords: ['--eval', '--print'] },
  pwsh: { inline: '', inlineWords: ['-c', '-command', '-e', '-ec', '-encodedcommand', '--command'] },
  powershell: { inline: '', inlineWords: ['-c', '-command', '-e', '-ec', '-encodedcommand', '--command'] },
};

/** `python3.12`, `pypy3`, `lua5.4`: versioned names of the same interpreter. */
function interpreterOf(name: string): InterpreterSpec | undefined {
  if (/^(python|pypy)[0-9.]*$/.test(name)) return PYTHON;
  if (/^lua[0-9.]+$/.test(name)) return INTERPRETERS.lua;
  return Object.hasOwn(INTERPRETERS, name) ? INTERPRETERS[name] : undefined;
}

/**
 * Programs whose job is to run another command, with options too many or too irregular to find it
 * reliably: a mis-parse would hand the policy the wrong program, so the whole command is opaque.
 */
const RUNNERS = new Set([
  'strace', 'ltrace', 'valgrind', 'gdb', 'lldb', 'perf', 'catchsegv',
  'unshare', 'nsenter', 'firejail', 'bwrap', 'systemd-run', 'runuser', 'sg', 'pkexec', 'machinectl',
  'tmux', 'screen', 'dtach', 'parallel', 'sem', 'entr', 'watchexec', 'start-stop-daemon', 'daemonize',
  'cgexec', 'numactl', 'taskset', 'chrt', 'prlimit', 'chpst', 'faketime', 'fakeroot',
  'proxychains', 'proxychains4', 'torsocks', 'tsocks', 'unbuffer', 'rlwrap', 'sshpass',
]);

/** Options with which a runner, interpreter or shell only prints (`tmux -V`, `fish --version`). */
export const PRINT_ONLY: ReadonlySet<string> = new Set(['--version', '-V', '--help', '-h']);

const AWKS = new Set(['awk', 'gawk', 'mawk', 'nawk']);

/** Shell script file names: running one is running shell commands the parser never sees. */
const SHELL_SCRIPT = /\.(sh|bash|zsh|ksh|dash)$/;

/**
 * Why the real work of this command is hidden from the parser, or null when its argv is what
 * runs. `words` is a command after its wrappers were seen through; words[0] is static.
 */
export function opaqueReason(words: readonly ShellWord[]): string | null {
  const head = words[0] as ShellWord;
  const name = path.posix.basename(head.text);
  const shown = JSON.stringify(words.map((w) => w.text).join(' '));
  if (SHELL_SCRIPT.test(name)) return `${shown} runs the shell script ${head.text}, whose commands the policy cannot see`;
  if (AWKS.has(name)) return awkReason(words, shown);
  if (name === 'sed' || name === 'gsed') return sedReason(words, shown);
  if (RUNNERS.has(name)) {
    if (words.length === 1 || words.slice(1).every((w) => PRINT_ONLY.has(w.text))) return null;
    return `${shown}: ${name} runs a command the policy cannot pick out of its options`;
  }
  const spec = interpreterOf(name);
  return spec ? interpreterReason(words, spec, name, shown) : null;
}

function interpreterReason(words: readonly ShellWord[], spec: InterpreterSpec, name: string, shown: string): string | null {
  const rest = words.slice(1);
  if (rest.some((w) => carriesCode(w, spec))) return `${shown} runs inline ${name} code, whose commands the policy cannot see`;
  const operand = rest.find((w) => !(w.kind === 'static' && w.text.length > 1 && w.text.startsWith('-')));
  if (spec.evalCommand !== undefined && operand?.text === spec.evalCommand) {
    return `${shown} runs inline ${name} code, whose commands the policy cannot see`;
  }
  // `-v` prints the version everywhere but in Python, where it is verbose mode.
  if (rest.some((w) => PRINT_ONLY.has(w.text) || (w.text === '-v' && spec !== PYTHON))) return null;
  const fromModule = spec.module !== undefined && rest.some((w) => shortFlags(w, spec).some((c) => spec.module?.includes(c)));
  // `python3`, `python3 -`, `node < x.js`, `… | perl`: the program is whatever arrives on stdin.
  if (!fromModule && (operand === undefined || operand.text === '-')) {
    return `${shown} runs ${name} code read from stdin, which the policy cannot see`;
  }
  return null;
}

/** Whether a word is an option that carries program text. */
function carriesCode(w: ShellWord, spec: InterpreterSpec): boolean {
  const lower = w.text.toLowerCase();
  if (spec.inlineWords?.some((o) => lower === o || lower.startsWith(`${o}=`))) return true;
  return shortFlags(w, spec).some((c) => spec.inline.includes(c));
}

/** The letters of a short-option cluster up to and including the first that takes a value. */
function shortFlags(w: ShellWord, spec: InterpreterSpec): string[] {
  // A dynamic word may be any option at all; it is only guessed at when it looks like one.
  if (!/^-[^-]/.test(w.text)) return [];
  const out: string[] = [];
  for (const c of w.text.slice(1)) {
    out.push(c);
    if (spec.values?.includes(c) || spec.inline.includes(c)) break;
  }
  return out;
}

/** awk's options that take a value (POSIX, gawk, mawk's -W), with the program in -e/--source when given. */
const AWK_VALUES = 'FvfeiIlEW';
const AWK_LONG = ['--field-separator', '--assign', '--file', '--source', '--include', '--load', '--exec'];

/**
 * awk runs commands through `system()`, pipes (`print | "cmd"`, `"cmd" | getline`, `|&`) and gawk
 * extensions (`@load`); a program that uses none only reads and prints.
 */
function awkReason(words: readonly ShellWord[], shown: string): string | null {
  const programs: ShellWord[] = [];
  let fromFile = false;
  let i = 1;
  for (; i < words.length; i++) {
    const w = words[i] as ShellWord;
    const t = w.text;
    if (t === '--') {
      i++;
      break;
    }
    if (!(t.length > 1 && t.startsWith('-')) || w.kind === 'dynamic') break;
    const long = AWK_LONG.find((o) => t === o || t.startsWith(`${o}=`));
    if (!long && !AWK_VALUES.includes(t[1] as string)) continue;
    const opt = long ?? t.slice(0, 2);
    // `--file=x` and `-fx` carry their value; `--file x` and `-f x` take the next word.
    const attached = long ? t.includes('=') : t.length > 2;
    const value = attached ? { ...w, text: t.slice(long ? t.indexOf('=') + 1 : 2) } : words[++i];
    if (opt === '-e' || opt === '--source') {
      if (value) programs.push(value);
    } else if (opt === '-f' || opt === '--file' || opt === '-i' || opt === '--include' || opt === '-E' || opt === '--exec') {
      fromFile = true;
    } else if (opt === '-l' || opt === '--load') {
      return `${shown} loads an awk extension, whose work the policy cannot see`;
    }
  }
  if (programs.length === 0 && !fromFile && words[i]) programs.push(words[i] as ShellWord);
  for (const p of programs) {
    if (p.kind === 'dynamic') return `${shown} runs an awk program only known at run time`;
    if (/\bsystem\s*\(|@load|\|/.test(p.text.replace(/\|\|/g, ''))) {
      return `${shown} runs an awk program that starts commands (system, pipes), whose commands the policy cannot see`;
    }
  }
  return null;
}

/**
 * GNU sed runs commands with its `e` command (`1e sudo id`) and the `e` flag of `s`
 * (`s/^/id /e`), unless `--sandbox` is given. Found by shape, not by parsing sed: a false alarm
 * only asks (or, in full-auto, denies with a reason) where a deny rule could match.
 */
function sedReason(words: readonly ShellWord[], shown: string): string | null {
  const scripts: ShellWord[] = [];
  let fromFile = false;
  let i = 1;
  for (; i < words.length; i++) {
    const w = words[i] as ShellWord;
    const t = w.text;
    if (t === '--sandbox') return null;
    if (t === '--') {
      i++;
      break;
    }
    if (!(t.length > 1 && t.startsWith('-')) || w.kind === 'dynamic') break;
    if (t.startsWith('--')) {
      const eq = t.indexOf('=');
      const name = eq < 0 ? t : t.slice(0, eq);
      if (name === '--expression' || name === '--file' || name === '--line-length') {
        const value = eq < 0 ? words[++i] : { ...w, text: t.slice(eq + 1) };
        if (name === '--expression' && value) scripts.push(value);
        if (name === '--file') fromFile = true;
      }
      continue;
    }
    for (let k = 1; k < t.length; k++) {
      const c = t[k] as string;
      if (c === 'i') break; // -i[SUFFIX]: the rest is the suffix
      if (c === 'e' || c === 'f' || c === 'l') {
        const value = k + 1 < t.length ? { ...w, text: t.slice(k + 1) } : words[++i];
        if (c === 'e' && value) scripts.push(value);
        if (c === 'f') fromFile = true;
        break;
      }
    }
  }
  if (scripts.length === 0 && !fromFile && words[i]) scripts.push(words[i] as ShellWord);
  for (const sc of scripts) {
    if (sc.kind === 'dynamic') return `${shown} runs a sed script only known at run time`;
    if (SED_EXEC_COMMAND.test(sc.text) || SED_EXEC_FLAG.test(sc.text)) {
      return `${shown} runs a sed script that executes commands (e), whose commands the policy cannot see`;
    }
  }
  return null;
}

/** An `e` command: at the start of a command, after an address (`1`, `$`, `/re/`, `!`) or a separator. */
const SED_EXEC_COMMAND = /(^|[;\n{}!$0-9/])\s*e(\s|;|}|$)/;
/** The `e` flag of `s`, among its other flags (`s/a/b/ge`), with any delimiter. */
const SED_EXEC_FLAG = /s([^\s\\])(?:\\.|(?!\1)[^\\])*\1(?:\\.|(?!\1)[^\\])*\1[gpiImMw0-9]*e/;

/**
 * Environment variables whose value is code that programs started with it run: a shell's startup
 * file (`BASH_ENV=run.sh bash -c true`), an exported function, a library loaded into every
 * program, git's commands and config, options interpreters read before the script.
 */
const CODE_ENV = new Set([
  'BASH_ENV', 'ENV', 'LD_PRELOAD', 'LD_AUDIT', 'NODE_OPTIONS', 'PERL5OPT', 'RUBYOPT',
  'GIT_SSH', 'GIT_SSH_COMMAND', 'GIT_PAGER', 'PAGER', 'GIT_EDITOR', 'GIT_SEQUENCE_EDITOR', 'EDITOR', 'VISUAL',
  'GIT_EXTERNAL_DIFF', 'GIT_ASKPASS', 'SSH_ASKPASS', 'GIT_PROXY_COMMAND', 'GIT_EXEC_PATH',
  'GIT_CONFIG_PARAMETERS', 'GIT_CONFIG_COUNT', 'GIT_CONFIG_GLOBAL', 'GIT_CONFIG_SYSTEM',
]);

/** Values that run nothing of note: `GIT_EDITOR=true git rebase --continue` only skips the editor. */
const INERT_VALUES = new Set(['', 'true', ':', 'cat']);

/**
 * Why assigning `name` (with `value`, when known) hides code that commands after it run, or null.
 * `PATH` is not here: the program name stays visible to deny rules, and a program found in the
 * workspace is project code (see above).
 */
export function envReason(name: string, value: ShellWord | null): string | null {
  if (!CODE_ENV.has(name) && !name.startsWith('BASH_FUNC_')) return null;
  if (value?.kind === 'static' && INERT_VALUES.has(value.text)) return null;
  return `${name}=${value ? JSON.stringify(value.text) : ''} makes the programs it reaches run code the policy cannot see`;
}
