import { createRequire } from 'node:module';
import path from 'node:path';
import type { ShCallExpr, ShNode, ShParser, ShRedirect, ShSyntax, ShWord } from 'mvdan-sh';
import picomatch from 'picomatch';
import { evalWord, ShellSource, type ShellWord } from './shell-words.js';
import { envReason, opaqueReason } from './shell-opaque.js';
import { unwrap, type Wrapper } from './shell-wrappers.js';

// Static analysis of one shell command string (design §8): every simple command it would run,
// with wrappers (env, sudo, sh -c, xargs, …) seen through, so policy rules match the program that
// really runs. What cannot be known statically is marked, never guessed: a command that cannot
// be parsed or chains too many commands is refused, an expansion is kept as its source text, and
// a command whose real work is elsewhere (`python3 -c …`, `bash run.sh`) says so in `opaque`.

export type { ShellWord, WordKind } from './shell-words.js';
export type { Wrapper } from './shell-wrappers.js';

/** Simple commands one shell call may run, counting those inside substitutions and `sh -c` scripts. */
export const MAX_CHAINED_COMMANDS = 16;
/** How deep `sh -c` / `eval` scripts may nest before the command is refused. */
export const MAX_SHELL_NESTING = 8;

/** One simple command, after wrappers are seen through. */
export interface SimpleCommand {
  /** Its words after quote removal; expansions stay as their source text (`$HOME`). */
  argv: string[];
  /** Basename of argv[0] (`/usr/bin/git` → `git`); the source text when it is dynamic. */
  program: string;
  /** Whether the program name comes from an expansion or glob, so nobody can tell what runs. */
  dynamicProgram: boolean;
  /**
   * Why the program's real work is hidden from the parser (inline interpreter code, a shell script
   * file, a runner it cannot unwrap), as a sentence; null when its argv is what it runs.
   */
  opaque: string | null;
  /** argv with how well each word is known. */
  words: ShellWord[];
  /**
   * The wrappers seen through, outermost first, each with its words up to the end (`sudo -u x git
   * push`), so rules can still match `sudo` or `timeout` and a privileged run stays visible.
   */
  wrappers: Wrapper[];
}

/** Why a command string was refused. */
export type ShellRefusal = 'unparseable' | 'too-many-commands' | 'too-deep';

/** The analysis of one command string; a refusal's reason is a sentence the model can act on. */
export type ParsedCommand =
  | {
      ok: true;
      commands: SimpleCommand[];
      /** Redirect targets that write (`>`, `>>`, `>|`, `&>`, `&>>`, `<>`, `>&file`), as literal words. */
      writes: string[];
      /** Whether any word of the command involves an expansion (globs do not count). */
      dynamic: boolean;
    }
  | { ok: false; code: ShellRefusal; reason: string };

type Refused = Extract<ParsedCommand, { ok: false }>;

interface Shell {
  syntax: ShSyntax;
  parser: ShParser;
  /** Redirect operators that open their target for writing. */
  writeOps: Set<number>;
  /** `>&`: writes when its target is a file name rather than a descriptor. */
  dupOut: number;
}

let shell: Shell | null = null;

/**
 * `syntax.NodeType` without its slow bridge call where the GopherJS wrapper carries its Go type
 * name (`mvdan.cc/sh/v3/syntax.*CallExpr`) as a plain property: a parse visits every node.
 */
function nodeTypeOf(syntax: ShSyntax, node: ShNode): string {
  const goType = (node as { $type?: unknown }).$type;
  if (typeof goType === 'string') {
    const m = /syntax\.\*?(\w+)$/.exec(goType);
    if (m) return m[1] as string;
  }
  return syntax.NodeType(node);
}

/**
 * One parser for the process, made on first use: importing mvdan-sh (a large GopherJS bundle)
 * and its first parse are slow, which processes that never parse shell should not pay.
 */
function getShell(): Shell {
  if (shell) return shell;
  const { syntax } = createRequire(import.meta.url)('mvdan-sh') as { syntax: ShSyntax };
  const parser = syntax.NewParser();
  // The operator numbers are Go token constants; read them off a probe instead of hard-coding them.
  const ops: number[] = [];
  syntax.Walk(parser.Parse(': >a >>a >|a &>a &>>a <>a >&a', 'probe'), (n) => {
    if (n && syntax.NodeType(n) === 'Redirect') ops.push((n as ShRedirect).Op);
    return true;
  });
  shell = { syntax, parser, writeOps: new Set(ops.slice(0, 6)), dupOut: ops[6] as number };
  return shell;
}

interface Acc {
  commands: SimpleCommand[];
  writes: string[];
  dynamic: boolean;
  /** Why an assignment (`BASH_ENV=f`, `export NODE_OPTIONS=…`) makes every command here opaque. */
  codeEnv: string | null;
}

/** An assignment (`X=1 cmd`, `export X=1`); not in the mvdan-sh typings. */
type ShAssign = ShNode & { Name?: { Value?: string } | null; Value?: ShWord | null };

/** Parses one shell command string (bash syntax) into the simple commands it may run. */
export function parseShellCommand(command: string): ParsedCommand {
  const acc: Acc = { commands: [], writes: [], dynamic: false, codeEnv: null };
  const refused = parseInto(command, null, [], 0, acc);
  if (refused) return refused;
  // The assignment may precede the command, be exported before it or be made in an outer script;
  // which commands it reaches is not worked out: all of them are opaque.
  if (acc.codeEnv !== null) for (const c of acc.commands) c.opaque ??= acc.codeEnv;
  if (acc.commands.length > MAX_CHAINED_COMMANDS) {
    return {
      ok: false,
      code: 'too-many-commands',
      reason: `the command chains ${acc.commands.length} commands; at most ${MAX_CHAINED_COMMANDS} are allowed — split it into several calls`,
    };
  }
  return { ok: true, commands: acc.commands, writes: acc.writes, dynamic: acc.dynamic };
}

function parseInto(script: string, via: string | null, wrappers: Wrapper[], depth: number, acc: Acc): Refused | null {
  if (depth > MAX_SHELL_NESTING) {
    return {
      ok: false,
      code: 'too-deep',
      reason: `the command nests scripts (sh -c, eval) more than ${MAX_SHELL_NESTING} deep; write the inner command directly`,
    };
  }
  const { syntax, parser } = getShell();
  let file;
  try {
    file = parser.Parse(script, 'cmd');
  } catch (err) {
    return unparseable(err, via);
  }
  const src = new ShellSource(script);
  // Collect first, act after: nested scripts reuse the one parser, which must not run inside Walk.
  const calls: ShCallExpr[] = [];
  const redirects: ShRedirect[] = [];
  const assigns: ShAssign[] = [];
  syntax.Walk(file, (node) => {
    if (!node) return true;
    const type = nodeTypeOf(syntax, node);
    if (type === 'CallExpr') calls.push(node as ShCallExpr);
    else if (type === 'Redirect') redirects.push(node as ShRedirect);
    else if (type === 'Assign') assigns.push(node as ShAssign);
    return true;
  });
  const nodeType = (n: ShNode): string => nodeTypeOf(syntax, n);
  for (const r of redirects) collectWrite(r, src, acc);
  for (const a of assigns) {
    const name = a.Name?.Value;
    if (name) acc.codeEnv ??= envReason(name, a.Value ? evalWord(a.Value, src, nodeType) : null);
  }
  for (const call of calls) {
    // Only assignments (`X=1`): no program runs; substitutions in them were walked as calls.
    if (call.Args.length === 0) continue;
    const words = call.Args.map((w) => evalWord(w, src, nodeType));
    if (words.some((w) => w.kind === 'dynamic')) acc.dynamic = true;
    for (const step of unwrap(words, wrappers)) {
      if (step.kind === 'script') {
        const refused = parseInto(step.script, step.via, step.wrappers, depth + 1, acc);
        if (refused) return refused;
      } else {
        acc.commands.push(toCommand(step.words, step.wrappers, step.kind === 'dynamic', step.kind === 'run' ? step.opaque : undefined));
      }
    }
  }
  return null;
}

function toCommand(words: ShellWord[], wrappers: Wrapper[], dynamicScript: boolean, opaque: string | undefined): SimpleCommand {
  const head = words[0] as ShellWord;
  const known = head.kind === 'static' && !dynamicScript;
  return {
    argv: words.map((w) => w.text),
    program: head.kind === 'static' ? path.posix.basename(head.text) : head.text,
    dynamicProgram: !known,
    opaque: known ? (opaque ?? opaqueReason(words) ?? envWrapperReason(wrappers)) : null,
    words,
    wrappers,
  };
}

/** `env BASH_ENV=f bash -c true`: assignments that env passes on are judged as prefix assignments are. */
function envWrapperReason(wrappers: readonly Wrapper[]): string | null {
  for (const w of wrappers) {
    if (w.words[0]?.kind !== 'static' || path.posix.basename(w.words[0].text) !== 'env') continue;
    // Only env's own words: `NAME=x` after its command is that command's argument.
    for (let i = 1; i < w.words.length; i++) {
      const word = w.words[i] as ShellWord;
      if (word.text === '-u' || word.text === '-C') i++;
      else if (!word.text.startsWith('-')) {
        const m = /^([^=]*)=([\s\S]*)$/.exec(word.text);
        if (!m) break;
        const why = envReason(m[1] as string, { text: m[2] as string, kind: word.kind });
        if (why) return why;
      }
    }
  }
  return null;
}

function collectWrite(r: ShRedirect, src: ShellSource, acc: Acc): void {
  const { writeOps, dupOut, syntax } = getShell();
  if (!r.Word) return;
  const target = evalWord(r.Word, src, (n) => nodeTypeOf(syntax, n));
  // `>&2` duplicates a descriptor; `>&file` (bash) is `&>file`.
  const writes = writeOps.has(r.Op) || (r.Op === dupOut && !/^(\d+|-)$/.test(target.text));
  if (!writes) return;
  if (target.kind === 'dynamic') acc.dynamic = true;
  if (!acc.writes.includes(target.text)) acc.writes.push(target.text);
}

function unparseable(err: unknown, via: string | null): Refused {
  const raw = typeof (err as { Error?: unknown })?.Error === 'function' ? String((err as { Error(): string }).Error()) : String(err);
  const m = /^cmd:(\d+):(\d+): ([\s\S]*)$/.exec(raw);
  const where = m ? ` (line ${m[1]}, column ${m[2]}${via ? ` of the script given to ${via}` : ''})` : via ? ` (in the script given to ${via})` : '';
  return { ok: false, code: 'unparseable', reason: `the command could not be parsed: ${m ? m[3] : raw}${where}` };
}

function programMatches(word: string, token: string, loose: boolean): boolean {
  // A rule naming a path (`/usr/local/bin/tool`) means that file; a bare name means it anywhere.
  if (!loose && token.includes('/')) return word === token;
  return path.posix.basename(word) === path.posix.basename(token);
}

/**
 * Whether argv starts with prefix word for word. The program is compared by basename
 * (`/usr/bin/git` matches `git`), unless the prefix names a path, which must then be equal.
 */
export function commandPrefixMatches(argv: readonly string[], prefix: readonly string[]): boolean {
  if (prefix.length === 0 || argv.length < prefix.length) return false;
  if (!programMatches(argv[0] as string, prefix[0] as string, false)) return false;
  return prefix.every((p, i) => i === 0 || argv[i] === p);
}

/** Whether a command surely starts with prefix: every compared word is static and equal (for allow rules). */
export function commandSurelyMatches(words: readonly ShellWord[], prefix: readonly string[]): boolean {
  return words.slice(0, prefix.length).every((w) => w.kind === 'static') && commandPrefixMatches(words.map((w) => w.text), prefix);
}

/**
 * Whether a command may start with prefix (for deny and ask rules): a dynamic word may be
 * anything, a glob whatever it matches, and options before a wanted word are skipped, with a
 * value or without, so `git -C /x --no-pager push` still meets a rule on `git push`. Flags in
 * the prefix compare as written (`-rf` is not `-fr`).
 */
export function commandMayMatch(words: readonly ShellWord[], prefix: readonly string[]): boolean {
  const head = words[0];
  if (!head || prefix.length === 0) return false;
  if (head.kind !== 'static') return true;
  if (!programMatches(head.text, prefix[0] as string, true)) return false;
  const memo = new Map<number, boolean>();
  const reach = (i: number, j: number): boolean => {
    if (j === prefix.length) return true;
    if (i >= words.length) return false;
    const key = i * (prefix.length + 1) + j;
    const seen = memo.get(key);
    if (seen !== undefined) return seen;
    const w = words[i] as ShellWord;
    const token = prefix[j] as string;
    let ok: boolean;
    // A dynamic word may expand to any number of words, so whatever follows may match.
    if (w.kind === 'dynamic') ok = true;
    else if (w.kind === 'glob' && globMatches(w.text, token)) ok = true;
    else {
      ok = w.kind === 'static' && w.text === token && reach(i + 1, j + 1);
      if (!ok && mayBeOption(w)) ok = reach(i + 1, j) || reach(i + 2, j);
    }
    memo.set(key, ok);
    return ok;
  };
  return reach(1, 1);
}

function mayBeOption(w: ShellWord): boolean {
  if (w.kind === 'static') return w.text.length > 1 && w.text.startsWith('-');
  // A glob expands to file names, which may start with a dash (`rm *` with a file named `-rf`).
  return /^[-*?[]/.test(w.text);
}

function globMatches(pattern: string, token: string): boolean {
  try {
    return picomatch.isMatch(token, pattern, { dot: true });
  } catch {
    return true; // a pattern picomatch cannot read may still match: assume it does
  }
}
