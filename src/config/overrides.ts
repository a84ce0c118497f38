import { parse } from 'smol-toml';
import { ConfigError } from '../protocol/errors.js';
import { ConfigFileSchema, describeIssue, keysHint, type ConfigFile } from './config-file.js';

// `-c key=value` sets one config-file key for one command, as Codex's `-c` does: the value is
// TOML (`-c max_parallel_calls=4`, `-c 'redact_env=["X"]'`), and one that does not parse as TOML
// is the plain string it reads as, so `-c approval_mode=deny-all` needs no shell-proof quotes.
// Dotted keys reach into tables, quoted where a name holds a dot (`pricing."gpt-4.1".input_per_mtok`).

/** Keys `-c` refuses, each with what sets it instead. */
const REFUSED: Record<string, string> = {
  workspaces: 'trust a workspace with `actorloop trust <dir>` (or stop with `--revoke`): it records that in your config file',
};

const USAGE = 'pass -c key=value, e.g. -c approval_mode=deny-all or -c capabilities.llama3.context_window=8192';

/** The path of a dotted TOML key (`a."b.c".d` → a, b.c, d); a ConfigError when it is not one. */
export function keyPath(key: string, override: string): string[] {
  let doc: Record<string, unknown>;
  try {
    // TOML parses its own keys: quoting and dots follow its rules, not ours
    doc = parse(`${key} = 0`);
  } catch {
    throw new ConfigError('config.override', `-c ${override}: "${key}" is not a config key`, { hint: USAGE });
  }
  const path: string[] = [];
  let node: unknown = doc;
  while (node !== null && typeof node === 'object') {
    const [name, value] = Object.entries(node as Record<string, unknown>)[0]!;
    path.push(name);
    node = value;
  }
  return path;
}

/** The value of one override: TOML when it parses as a TOML value, else the string as written. */
export function overrideValue(text: string): unknown {
  try {
    return (parse(`v = ${text}`) as { v: unknown }).v;
  } catch {
    return text;
  }
}

/**
 * The config layer of a command's `-c` overrides, validated by the config file's schema: a later
 * override of the same key wins, dotted ones add up into their table. A bad one is a ConfigError
 * naming it (with a "did you mean" for a key that looks like a typo).
 */
export function parseOverrides(overrides: readonly string[]): ConfigFile {
  const layer: Record<string, unknown> = {};
  for (const override of overrides) {
    const eq = assignmentAt(override);
    if (eq <= 0) throw new ConfigError('config.override', `-c ${override}: expected key=value`, { hint: USAGE });
    const path = keyPath(override.slice(0, eq).trim(), override);
    const refused = REFUSED[path[0]!];
    if (refused) throw new ConfigError('config.override', `-c ${override}: ${path[0]} is not set with -c`, { hint: refused });
    setPath(layer, path, overrideValue(override.slice(eq + 1).trim()));
  }
  // A key the layer leaves out may come from a file (`-c pricing.x.input_per_mtok=2` over a file
  // with its output price): that is checked once the layers are merged (`checkMerged`).
  const parsed = ConfigFileSchema.safeParse(layer);
  const issue = parsed.error?.issues.find((i) => !(i.code === 'invalid_type' && valueAt(layer, i.path) === undefined));
  if (issue) {
    throw new ConfigError('config.override', `-c: ${describeIssue(issue)}`, {
      hint: issue.code === 'unrecognized_keys' ? keysHint(issue) : `${USAGE} (a value that is not TOML is taken as a string)`,
    });
  }
  return layer as ConfigFile;
}

/** The files' settings with the overrides applied, checked whole: a ConfigError naming `-c` when they do not fit together. */
export function checkMerged(merged: ConfigFile): ConfigFile {
  const parsed = ConfigFileSchema.safeParse(merged);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw new ConfigError('config.override', `-c: ${describeIssue(issue)}`, { hint: 'set it too, with another -c (or in a config file)' });
}

/** Where the `=` between key and value is: the first one outside a quoted key. */
function assignmentAt(override: string): number {
  let quote: string | null = null;
  for (let i = 0; i < override.length; i++) {
    const c = override[i]!;
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (c === '=') {
      return i;
    }
  }
  return -1;
}

function valueAt(node: unknown, path: readonly PropertyKey[]): unknown {
  let at = node;
  for (const step of path) {
    if (at === null || typeof at !== 'object') return undefined;
    at = (at as Record<PropertyKey, unknown>)[step];
  }
  return at;
}

function setPath(into: Record<string, unknown>, path: string[], value: unknown): void {
  let node = into;
  for (const name of path.slice(0, -1)) {
    const next = node[name];
    // a dotted key under a key set whole (`-c pricing={} -c pricing.x.input_per_mtok=1`) adds to it
    node = node[name] = next !== null && typeof next === 'object' && !Array.isArray(next) ? (next as Record<string, unknown>) : {};
  }
  node[path.at(-1)!] = value;
}

/**
 * The files' settings with the overrides over them: the overrides win, tables merge key by key
 * (`-c capabilities.x.context_window=1` keeps the other models' capabilities), and lists add up as
 * the files' do (a `-c` adds policy rules and redactions; it cannot take the files' deny rules away).
 */
export function applyOverrides(file: ConfigFile, overrides: ConfigFile): ConfigFile {
  return merge(file, overrides) as ConfigFile;
}

function merge(base: unknown, over: unknown): unknown {
  if (over === undefined) return base;
  if (Array.isArray(over)) return Array.isArray(base) ? [...base, ...over.filter((x) => !base.some((b) => JSON.stringify(b) === JSON.stringify(x)))] : over;
  if (over === null || typeof over !== 'object' || base === null || typeof base !== 'object' || Array.isArray(base)) return over;
  const out: Record<string, unknown> = { ...(base as Record<string, unknown>) };
  for (const [k, v] of Object.entries(over)) out[k] = merge(out[k], v);
  return out;
}
