import path from 'node:path';
import type { ShellWord } from './shell-words.js';

// Seeing through wrapper programs (`env X=1 rm`, `sudo -u x git push`, `xargs rm`, `sh -c '…'`)
// so policy rules match the program that really runs. Each wrapper's options are parsed the way
// GNU getopt with "+" does (options stop at the first operand), because that is how these tools
// find their command; a mis-parse would hand the policy the wrong program name.

/** A wrapper seen through: its words up to the end of the command, and whether it raises privileges. */
export interface Wrapper {
  words: ShellWord[];
  privileged: boolean;
}

/** One step of what a command amounts to once wrappers are seen through. */
export type Unwrapped =
  /** A program runs with these words (the first may be dynamic). */
  | { kind: 'run'; words: ShellWord[]; wrappers: Wrapper[] }
  /** A static script runs (`sh -c`, `eval`, `su -c`, `watch`, `trap`, `alias`): parse it and use its commands. */
  | { kind: 'script'; script: string; via: string; wrappers: Wrapper[] }
  /** A script that is only known at run time (`bash -c "$X"`, `eval $X`): nobody can tell what runs. */
  | { kind: 'opaque'; words: ShellWord[]; wrappers: Wrapper[] };

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
}

const WRAPPERS: Readonly<Record<string, WrapperSpec>> = {
  env: { short: 'uCS', long: ['--unset', '--chdir', '--split-string'], assignments: true },
  command: { noRun: 'vV' },
  builtin: {},
  exec: { short: 'a' },
  nohup: {},
  setsid: {},
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
const SHELL_OPTIONS: OptionSpec = { short: 'oO', long: ['--rcfile', '--init-file'], plus: true };
const WATCH_OPTIONS: OptionSpec = { short: 'n', optional: 'd', long: ['--interval'] };
const FIND_EXEC = new Set(['-exec', '-execdir', '-ok', '-okdir']);
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;
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
    if (assignments && ASSIGNMENT.test(t)) {
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
    if ([...(spec.noRun ?? '')].some((c) => s.opts.has(c)) || rest.length === 0) return [{ kind: 'run', words, wrappers }];
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
    // A script file is the shell's business (rules can name `bash`); a script read from stdin
    // (`curl … | sh`, `bash <<EOF`, `sh -s`) is text nobody here can see.
    return script && !s.opts.has('s') ? { kind: 'run', words, wrappers } : { kind: 'opaque', words, wrappers };
  }
  if (!script) return { kind: 'run', words, wrappers };
  if (script.kind === 'dynamic') return { kind: 'opaque', words, wrappers };
  return { kind: 'script', script: script.text, via: `${via} -c`, wrappers: inner };
}

/** `eval a b` and `watch a b` join their words with spaces into a script. */
function joinedScript(words: ShellWord[], from: number, via: string, wrappers: Wrapper[], inner: Wrapper[]): Unwrapped {
  const parts = words.slice(from);
  if (parts.length === 0) return { kind: 'run', words, wrappers };
  if (parts.some((w) => w.kind === 'dynamic')) return { kind: 'opaque', words, wrappers };
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
    if (script.kind === 'dynamic') return { kind: 'opaque', words, wrappers };
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
  if (action.kind === 'dynamic') return { kind: 'opaque', words, wrappers };
  return { kind: 'script', script: action.text, via: 'trap', wrappers: inner };
}

/** `alias g='git push'` runs later wherever aliases expand; its value counts as commands now. */
function aliasScripts(words: ShellWord[], wrappers: Wrapper[], inner: Wrapper[]): Unwrapped[] {
  const out: Unwrapped[] = [];
  for (const w of words.slice(1)) {
    const eq = w.text.indexOf('=');
    if (eq <= 0) continue;
    if (w.kind === 'dynamic') return [{ kind: 'opaque', words, wrappers }];
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
