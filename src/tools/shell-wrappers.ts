import path from 'node:path';
import { PRINT_ONLY } from './shell-opaque.js';
import type { ShellWord } from './shell-words.js';

// Seeing through wrapper programs (`env X=1 rm`, `sudo -u x git push`, `xargs rm`, `sh -c '…'`,
// `chroot / cmd`, `script -c '…'`, `git -c alias.x='!…'`) so policy rules match the program that
// really runs. Each wrapper's options are parsed the way GNU getopt with "+" does (options stop at
// the first operand), because that is how these tools find their command; a mis-parse would hand
// the policy the wrong program name. What a wrapper runs that cannot be seen (a shell script file,
// `source f`, a git config value that names a program) is marked opaque, for the policy to fail
// closed on (policy.ts); interpreters and runners are judged in shell-opaque.ts.

/** A wrapper seen through: its words up to the end of the command, and whether it raises privileges. */
export interface Wrapper {
  words: ShellWord[];
  privileged: boolean;
}

/** One step of what a command amounts to once wrappers are seen through. */
export type Unwrapped =
  /**
   * A program runs with these words (the first may be dynamic). `opaque`: why what it runs cannot
   * be seen (`bash f.sh` runs a file); absent when its words are the whole story as far as we know.
   */
  | { kind: 'run'; words: ShellWord[]; wrappers: Wrapper[]; opaque?: string }
  /** A static script runs (`sh -c`, `eval`, `su -c`, `watch`, `trap`, `alias`): parse it and use its commands. */
  | { kind: 'script'; script: string; via: string; wrappers: Wrapper[] }
  /** A script that is only known at run time (`bash -c "$X"`, `eval $X`, stdin): nobody can tell what runs. */
  | { kind: 'dynamic'; words: ShellWord[]; wrappers: Wrapper[] };

interface OptionSpec {
  /** Short options that take a value, attached (`-n5`) or as the next word (`-n 5`). */
  short?: string;
  /** Short options whose value is optional and only ever attached (`xargs -i{}`). */
  optional?: string;
  /** Long options that take the next word as their value when written without `=`. */
  long?: string[];
  /** Whether `+o opt` style options exist (shells). */
  plus?: boolean;
}

interface WrapperSpec extends OptionSpec {
  /** Operands between the options and the command (timeout's DURATION). */
  positionals?: number;
  /** Whether `NAME=value` words may precede the command (env). */
  assignments?: boolean;
  /** Whether the command runs with raised privileges. */
  privileged?: boolean;
  /** Short options with which the wrapper runs nothing (`command -v git` only prints). */
  noRun?: string;
  /** Whether, given no command, it starts an interactive shell that reads stdin (`chroot /`). */
  shellWhenEmpty?: boolean;
}

const WRAPPERS: Readonly<Record<string, WrapperSpec>> = {
  env: { short: 'uCS', long: ['--unset', '--chdir', '--split-string'], assignments: true },
  command: { noRun: 'vV' },
  builtin: {},
  exec: { short: 'a' },
  nohup: {},
  setsid: {},
  chroot: { long: ['--userspec', '--groups'], positionals: 1, shellWhenEmpty: true },
  // Its options are all long; a program and its arguments follow them.
  'dbus-launch': { long: ['--config-file', '--autolaunch'] },
  // `flock FILE cmd…` or `flock FILE -c 'cmd'`; `flock FD` alone runs nothing.
  flock: { short: 'wE', long: ['--timeout', '--wait', '--conflict-exit-code'], positionals: 1 },
  busybox: {},
  nice: { short: 'n', long: ['--adjustment'] },
  ionice: { short: 'cn', long: ['--class', '--classdata'], noRun: 'p' },
  time: { short: 'fo', long: ['--format', '--output'] },
  timeout: { short: 'sk', long: ['--signal', '--kill-after'], positionals: 1 },
  stdbuf: { short: 'ioe', long: ['--input', '--output', '--error'] },
  sudo: {
    short: 'ughprtCDTUR',
    long: ['--user', '--group', '--host', '--prompt', '--role', '--type', '--close-from', '--chdir', '--command-timeout', '--other-user', '--chroot'],
    privileged: true,
    noRun: 'lveK',
  },
  doas: { short: 'uC', privileged: true },
  xargs: {
    short: 'adEILnPs',
    optional: 'eil',
    long: ['--arg-file', '--delimiter', '--max-args', '--max-procs', '--max-chars', '--process-slot-var'],
  },
};

const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'ksh', 'mksh', 'ash']);
/** Shells whose syntax is not bash's: whatever they run is opaque, since parsing it as bash would guess. */
const OTHER_SHELLS = new Set(['fish', 'csh', 'tcsh', 'elvish', 'nu', 'xonsh', 'rc', 'es']);
const SHELL_OPTIONS: OptionSpec = { short: 'oO', long: ['--rcfile', '--init-file'], plus: true };
const WATCH_OPTIONS: OptionSpec = { short: 'n', optional: 'd', long: ['--interval'] };
const FIND_EXEC = new Set(['-exec', '-execdir', '-ok', '-okdir']);
// env takes any word with an `=` before its command as an assignment (`'BASH_FUNC_f%%=…'` too).
const ASSIGNMENT = /=/;
/** The placeholder for the words xargs appends from its input. */
export const XARGS_INPUT = '{xargs input}';

interface Scanned {
  /** Index of the first word after the options. */
  next: number;
  /** Options seen: short letter or long name → value ('' for flags). */
  opts: Map<string, string>;
}

/** Parses the options after words[0] as getopt with "+" would. */
function scanOptions(words: ShellWord[], spec: OptionSpec, assignments = false): Scanned {
  const opts = new Map<string, string>();
  let i = 1;
  let assigning = false;
  while (i < words.length) {
    const w = words[i] as ShellWord;
    // An unknown word where an option may be: stop, so it is taken as the command (and is dynamic).
    if (w.kind !== 'static') break;
    const t = w.text;
    // Options come first (`--unset=X` is one); from the first assignment on, every `=` word is one.
    if (assignments && (assigning || !t.startsWith('-')) && ASSIGNMENT.test(t)) {
      assigning = true;
      i++;
      continue;
    }
    if (assigning) break;
    if (t === '--') return { next: i + 1, opts };
    if (t === '-') {
      opts.set('-', '');
      i++;
      continue;
    }
    if (!(t.startsWith('-') || (spec.plus === true && t.startsWith('+'))) || t.length < 2) break;
    i++;
    if (t.startsWith('--')) {
      const eq = t.indexOf('=');
      const name = eq < 0 ? t : t.slice(0, eq);
      // getopt_long accepts any unambiguous prefix (`--kill` for `--kill-after`).
      const known = spec.long?.find((l) => l.startsWith(name));
      if (eq < 0 && known) opts.set(known, words[i++]?.text ?? '');
      else opts.set(known ?? name, eq < 0 ? '' : t.slice(eq + 1));
      continue;
    }
    for (let k = 1; k < t.length; k++) {
      const c = t[k] as string;
      if (spec.short?.includes(c)) {
        if (k + 1 < t.length) opts.set(c, t.slice(k + 1));
        else opts.set(c, words[i++]?.text ?? '');
        break;
      }
      if (spec.optional?.includes(c)) {
        opts.set(c, t.slice(k + 1));
        break;
      }
      opts.set(c, '');
    }
  }
  return { next: i, opts };
}

function staticWords(text: string): ShellWord[] {
  return text.split(/\s+/).filter((t) => t !== '').map((t) => ({ text: t, kind: 'static' as const }));
}

/**
 * What running these words amounts to: the wrappers seen through and, at the end, the program
 * that runs or the script that is parsed next. A wrapper with no command left is itself the
 * program (`env` prints the environment, `sudo -l` lists). `find -exec` adds the command it runs.
 */
export function unwrap(first: ShellWord[], outer: Wrapper[]): Unwrapped[] {
  let words = first;
  const wrappers = [...outer];
  for (;;) {
    const head = words[0];
    if (!head || head.kind !== 'static') return [{ kind: 'run', words, wrappers }];
    const name = path.posix.basename(head.text);
    const here = (privileged = false): Wrapper[] => [...wrappers, { words, privileged }];
    if (SHELLS.has(name)) return [shellScript(words, name, scanOptions(words, SHELL_OPTIONS), wrappers, here())];
    if (OTHER_SHELLS.has(name)) return [otherShell(words, name, wrappers)];
    if ((name === 'source' || name === '.') && words.length > 1) {
      const opaque = `${shown(words)} runs the shell script ${words[1]?.text} in this shell, whose commands the policy cannot see`;
      return [{ kind: 'run', words, wrappers, opaque }];
    }
    if (name === 'script') return [scriptCommand(words, wrappers, here())];
    if (name === 'git') return gitCommand(words, wrappers);
    if (name === 'eval') return [joinedScript(words, 1, 'eval', wrappers, here())];
    if (name === 'watch') {
      const s = scanOptions(words, WATCH_OPTIONS);
      // `watch -x` runs argv directly; otherwise it joins its words and hands them to `sh -c`.
      if (s.next >= words.length) return [{ kind: 'run', words, wrappers }];
      if (s.opts.has('x') || s.opts.has('--exec')) {
        wrappers.push({ words, privileged: false });
        words = words.slice(s.next);
        continue;
      }
      return [joinedScript(words, s.next, 'watch', wrappers, here())];
    }
    if (name === 'su') return [suScript(words, wrappers, here(true))];
    if (name === 'trap') return [trapScript(words, wrappers, here())];
    if (name === 'alias') return aliasScripts(words, wrappers, here());
    if (name === 'find') return findExec(words, wrappers);
    const spec = WRAPPERS[name];
    if (!spec) return [{ kind: 'run', words, wrappers }];
    const s = scanOptions(words, spec, spec.assignments);
    let rest = words.slice(s.next + (spec.positionals ?? 0));
    // `env -S 'git push'` splits its value into the command's first words.
    const split = name === 'env' ? (s.opts.get('S') ?? s.opts.get('--split-string')) : undefined;
    if (split !== undefined) rest = [...staticWords(split), ...rest];
    if ([...(spec.noRun ?? '')].some((c) => s.opts.has(c))) return [{ kind: 'run', words, wrappers }];
    if (rest.length === 0) return [{ kind: spec.shellWhenEmpty === true ? 'dynamic' : 'run', words, wrappers }];
    if (name === 'flock' && (rest[0]?.text === '-c' || rest[0]?.text === '--command')) {
      return [commandOption(words, rest[1], 'flock -c', wrappers, here())];
    }
    wrappers.push({ words, privileged: spec.privileged === true });
    if (name === 'xargs') rest = xargsCommand(rest, s.opts);
    words = rest;
  }
}

/** `bash -lc 'script' name args`: the script is the first operand when `-c` was given. */
function shellScript(words: ShellWord[], via: string, s: Scanned, wrappers: Wrapper[], inner: Wrapper[]): Unwrapped {
  const script = words[s.next];
  if (!s.opts.has('c')) {
    if (s.opts.has('--version') || s.opts.has('--help')) return { kind: 'run', words, wrappers };
    // A script read from stdin (`curl … | sh`, `bash <<EOF`, `sh -s`) is text nobody here can see:
    // refused. A script file is shell commands the policy cannot see either (`bash run.sh` with
    // `sudo id` in it), so it is opaque; `-n` only checks its syntax.
    if (!script || s.opts.has('s')) return { kind: 'dynamic', words, wrappers };
    if (s.opts.has('n')) return { kind: 'run', words, wrappers };
    return { kind: 'run', words, wrappers, opaque: `${shown(words)} runs the shell script ${script.text}, whose commands the policy cannot see` };
  }
  if (!script) return { kind: 'run', words, wrappers };
  if (script.kind === 'dynamic') return { kind: 'dynamic', words, wrappers };
  return { kind: 'script', script: script.text, via: `${via} -c`, wrappers: inner };
}

/** A command as a sentence quotes it. */
function shown(words: readonly ShellWord[]): string {
  return JSON.stringify(words.map((w) => w.text).join(' '));
}

/** A script given as an option's value (`flock f -c 'cmd'`, `script -c 'cmd'`): parsed as `sh -c` is. */
function commandOption(words: ShellWord[], script: ShellWord | undefined, via: string, wrappers: Wrapper[], inner: Wrapper[]): Unwrapped {
  if (!script) return { kind: 'run', words, wrappers };
  if (script.kind === 'dynamic') return { kind: 'dynamic', words, wrappers };
  return { kind: 'script', script: script.text, via, wrappers: inner };
}

/** fish, csh and the like: their scripts are not bash, so what they run is opaque, and bare they read stdin. */
function otherShell(words: ShellWord[], name: string, wrappers: Wrapper[]): Unwrapped {
  if (words.length === 1) return { kind: 'dynamic', words, wrappers };
  if (words.slice(1).every((w) => PRINT_ONLY.has(w.text))) return { kind: 'run', words, wrappers };
  return { kind: 'run', words, wrappers, opaque: `${shown(words)} runs ${name} code, whose syntax the policy does not parse` };
}

/** Short options of util-linux `script` that take a value (`-E auto`, `-T file`). */
const SCRIPT_VALUES = 'EIOBTmo';

/**
 * `script [options] [file]` runs `-c CMD` through the shell; without `-c` it starts an
 * interactive shell that reads stdin. Its getopt permutes, so `-c` may come after the file.
 */
function scriptCommand(words: ShellWord[], wrappers: Wrapper[], inner: Wrapper[]): Unwrapped {
  for (let i = 1; i < words.length; i++) {
    const w = words[i] as ShellWord;
    const t = w.text;
    if (t === '--') break;
    if (PRINT_ONLY.has(t)) return { kind: 'run', words, wrappers };
    if (w.kind !== 'static') continue;
    if (t.startsWith('--c') && '--command'.startsWith(t.split('=')[0] as string)) {
      const eq = t.indexOf('=');
      return commandOption(words, eq < 0 ? words[i + 1] : { text: t.slice(eq + 1), kind: w.kind }, 'script -c', wrappers, inner);
    }
    if (!/^-[^-]/.test(t)) continue;
    for (let k = 1; k < t.length; k++) {
      const c = t[k] as string;
      if (c === 'c') return commandOption(words, k + 1 < t.length ? { text: t.slice(k + 1), kind: w.kind } : words[i + 1], 'script -c', wrappers, inner);
      if (SCRIPT_VALUES.includes(c)) {
        if (k + 1 === t.length) i++;
        break;
      }
    }
  }
  return { kind: 'dynamic', words, wrappers };
}

/** git's global options that take the next word as their value. */
const GIT_VALUE_OPTIONS = new Set(['-C', '--git-dir', '--work-tree', '--namespace', '--super-prefix', '--attr-source']);

/**
 * Config keys whose value git runs as a command or that bring in more config (lowercased; the
 * subsection of `diff.<driver>.command` and the like is any text). Aliases are handled apart.
 */
const GIT_COMMAND_KEYS = [
  /^core\.(pager|editor|sshcommand|askpass|fsmonitor|hookspath|gitproxy)$/,
  /^(sequence\.editor|diff\.external|gpg\.program|interactive\.difffilter|uploadpack\.packobjectshook|include\.path)$/,
  /^pager\./,
  /^credential\.(.+\.)?helper$/,
  /^(diff|merge|filter|mergetool|difftool|man|browser|gpg|includeif|remote|protocol)\..+\.(command|textconv|driver|clean|smudge|process|cmd|program|path|uploadpack|receivepack|allow)$/,
];

/**
 * `git [global options] subcommand …`: git itself is the program (so rules on `git push` match),
 * plus what its config runs. `-c alias.x='!cmd'` is a shell command (git hands it to `sh -c`),
 * `-c alias.x='push'` a git command; a key that names a program (`core.pager`, `core.sshCommand`,
 * …), config from the environment (`--config-env`) and `--exec-path=dir` make git opaque.
 * `rebase --exec`, `bisect run` and `submodule foreach` add the commands they run.
 */
function gitCommand(words: ShellWord[], wrappers: Wrapper[]): Unwrapped[] {
  const extra: Unwrapped[] = [];
  const inner = (): Wrapper[] => [...wrappers, { words, privileged: false }];
  let opaque: string | undefined;
  const config = (kv: ShellWord | undefined, fromEnv: boolean): void => {
    if (!kv) return;
    const eq = kv.text.indexOf('=');
    const key = (eq < 0 ? kv.text : kv.text.slice(0, eq)).toLowerCase();
    const value = eq < 0 ? '' : kv.text.slice(eq + 1);
    // `-c user.email="$EMAIL"` is harmless; an expansion in the key may be any key.
    const dynamicKey = kv.kind === 'dynamic' && /[$`]/.test(eq < 0 ? kv.text : kv.text.slice(0, eq));
    if (key.startsWith('alias.')) {
      if (fromEnv || kv.kind === 'dynamic') opaque ??= `${shown(words)} defines a git alias only known at run time`;
      else if (value.startsWith('!')) extra.push({ kind: 'script', script: value.slice(1), via: `git -c ${key}`, wrappers: inner() });
      else extra.push({ kind: 'run', words: [words[0] as ShellWord, ...staticWords(value)], wrappers: inner() });
    } else if (dynamicKey || GIT_COMMAND_KEYS.some((re) => re.test(key))) {
      opaque ??= `${shown(words)} sets git config ${key}, which runs a command the policy cannot see`;
    }
  };
  let i = 1;
  for (; i < words.length; i++) {
    const t = (words[i] as ShellWord).text;
    if (!t.startsWith('-')) break;
    if (t === '-c') config(words[++i], false);
    else if (t === '--config-env') config(words[++i], true);
    else if (t.startsWith('--config-env=')) config({ text: t.slice('--config-env='.length), kind: 'static' }, true);
    else if (t.startsWith('--exec-path=')) opaque ??= `${shown(words)} runs git commands from ${t.slice('--exec-path='.length)}, which the policy cannot see`;
    else if (GIT_VALUE_OPTIONS.has(t)) i++;
  }
  const sub = words[i]?.text;
  const args = words.slice(i + 1);
  if (sub === 'rebase') {
    for (let k = 0; k < args.length; k++) {
      const t = (args[k] as ShellWord).text;
      let cmd: ShellWord | undefined;
      if (t === '-x' || t === '--exec') cmd = args[k + 1];
      else if (t.startsWith('--exec=')) cmd = { text: t.slice('--exec='.length), kind: (args[k] as ShellWord).kind };
      else if (/^-x./.test(t)) cmd = { text: t.slice(2), kind: (args[k] as ShellWord).kind };
      if (cmd) extra.push(commandOption(words, cmd, 'git rebase --exec', wrappers, inner()));
    }
  } else if (sub === 'bisect' && args[0]?.text === 'run' && args.length > 1) {
    extra.push(...unwrap(args.slice(1), inner()));
  } else if (sub === 'submodule' && args.some((w) => w.text === 'foreach')) {
    let k = args.findIndex((w) => w.text === 'foreach') + 1;
    while (args[k] && /^-/.test((args[k] as ShellWord).text)) k++;
    const cmd = args.slice(k);
    if (cmd.length > 0) extra.push(joinedScript(cmd, 0, 'git submodule foreach', wrappers, inner()));
  } else if (sub === 'filter-branch') {
    opaque ??= `${shown(words)} runs filter commands the policy cannot see`;
  }
  return [{ kind: 'run', words, wrappers, ...(opaque === undefined ? {} : { opaque }) }, ...extra];
}

/** `eval a b` and `watch a b` join their words with spaces into a script. */
function joinedScript(words: ShellWord[], from: number, via: string, wrappers: Wrapper[], inner: Wrapper[]): Unwrapped {
  const parts = words.slice(from);
  if (parts.length === 0) return { kind: 'run', words, wrappers };
  if (parts.some((w) => w.kind === 'dynamic')) return { kind: 'dynamic', words, wrappers };
  return { kind: 'script', script: parts.map((w) => w.text).join(' '), via, wrappers: inner };
}

/** `su [user] -c 'script'` (util-linux su takes its options anywhere): the script runs as another user. */
function suScript(words: ShellWord[], wrappers: Wrapper[], inner: Wrapper[]): Unwrapped {
  for (let i = 1; i < words.length; i++) {
    const t = (words[i] as ShellWord).text;
    let script: ShellWord | undefined;
    if (t === '-c' || t === '--command' || t === '--session-command') script = words[i + 1];
    else if (t.startsWith('--command=')) script = { text: t.slice('--command='.length), kind: (words[i] as ShellWord).kind };
    if (!script) continue;
    if (script.kind === 'dynamic') return { kind: 'dynamic', words, wrappers };
    return { kind: 'script', script: script.text, via: 'su -c', wrappers: inner };
  }
  return { kind: 'run', words, wrappers };
}

/** `trap 'cmd' EXIT` runs its action later, in this shell: its commands count as the command's. */
function trapScript(words: ShellWord[], wrappers: Wrapper[], inner: Wrapper[]): Unwrapped {
  const i = words[1]?.text === '--' ? 2 : 1;
  const action = words[i];
  // `trap -p`, `trap - INT` and `trap '' INT` (ignore) run nothing; a lone action is a reset in POSIX.
  if (!action || words.length <= i + 1 || (action.kind === 'static' && (action.text === '' || action.text.startsWith('-')))) {
    return { kind: 'run', words, wrappers };
  }
  if (action.kind === 'dynamic') return { kind: 'dynamic', words, wrappers };
  return { kind: 'script', script: action.text, via: 'trap', wrappers: inner };
}

/** `alias g='git push'` runs later wherever aliases expand; its value counts as commands now. */
function aliasScripts(words: ShellWord[], wrappers: Wrapper[], inner: Wrapper[]): Unwrapped[] {
  const out: Unwrapped[] = [];
  for (const w of words.slice(1)) {
    const eq = w.text.indexOf('=');
    if (eq <= 0) continue;
    if (w.kind === 'dynamic') return [{ kind: 'dynamic', words, wrappers }];
    out.push({ kind: 'script', script: w.text.slice(eq + 1), via: 'alias', wrappers: inner });
  }
  return out.length > 0 ? out : [{ kind: 'run', words, wrappers }];
}

/** xargs runs its command with words read from its input: appended, or in place of the -I string. */
function xargsCommand(rest: ShellWord[], opts: Map<string, string>): ShellWord[] {
  // -I R, or -i / --replace with an optional R that defaults to {}.
  const optional = (name: string): string | undefined => (opts.has(name) ? opts.get(name) || '{}' : undefined);
  const replace = opts.get('I') ?? optional('i') ?? optional('--replace');
  if (replace === undefined) return [...rest, { text: XARGS_INPUT, kind: 'dynamic' }];
  return rest.map((w) => (w.text.includes(replace) ? { text: w.text, kind: 'dynamic' as const } : w));
}

/** `find … -exec cmd {} ;` runs find and, for each match, cmd (with `{}` a file name). */
function findExec(words: ShellWord[], wrappers: Wrapper[]): Unwrapped[] {
  const out: Unwrapped[] = [{ kind: 'run', words, wrappers }];
  for (let i = 1; i < words.length; i++) {
    if (!FIND_EXEC.has((words[i] as ShellWord).text)) continue;
    let end = i + 1;
    while (end < words.length && !isExecEnd(words, end)) end++;
    const cmd = words.slice(i + 1, end).map((w) => (w.text.includes('{}') ? { text: w.text, kind: 'dynamic' as const } : w));
    if (cmd.length > 0) out.push(...unwrap(cmd, [...wrappers, { words, privileged: false }]));
    i = end;
  }
  return out;
}

function isExecEnd(words: ShellWord[], i: number): boolean {
  const t = (words[i] as ShellWord).text;
  // `+` ends -exec only right after `{}`; `;` always does.
  return t === ';' || (t === '+' && (words[i - 1] as ShellWord).text === '{}');
}
