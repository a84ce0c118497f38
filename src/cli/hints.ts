import type { EffectiveConfig } from '../config/config.js';

// A command line the CLI prints for a person to paste (approve, answer, resume, ...) must reach
// the same agent as the command that printed it: it carries that command's data dir and NATS
// server whenever they are not what a bare `actorloop` would find.

/** A part of a printed command the person fills in (`"<text>"`, `[--reason "<why>"]`): printed as is, never quoted. */
export interface Placeholder {
  placeholder: string;
}

/** A placeholder part of a command line. */
export function placeholder(text: string): Placeholder {
  return { placeholder: text };
}

/** An argument as a POSIX shell reads it back: as is when it is safe, else in single quotes. */
export function shellQuote(arg: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg)) return arg;
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** What a printed command line needs of the config of the command that prints it. */
export type WhereConfig = Pick<EffectiveConfig, 'sources' | 'dataDir' | 'natsUrl'> & {
  /** A command run with `--gateway`: the lines it prints reach the agent through the same gateway. */
  gateway?: { url: string; tokenFile: string | null };
};

/** The flags that take a pasted command where this one went: `--data-dir` unless it is the built-in default, `--nats` when a server was named (or `--gateway`, with the token file or the data dir it reads the token from). */
export function whereFlags(config: WhereConfig): string[] {
  const flags: string[] = [];
  const dataDir = (config.sources.data_dir ?? 'default') !== 'default' ? ['--data-dir', config.dataDir] : [];
  if (config.gateway) {
    // without a token file the pasted command reads the gateway's token from the same data dir
    return ['--gateway', config.gateway.url, ...(config.gateway.tokenFile !== null ? ['--gateway-token-file', config.gateway.tokenFile] : dataDir)];
  }
  flags.push(...dataDir);
  if (config.natsUrl !== null) flags.push('--nats', config.natsUrl);
  return flags;
}

/**
 * `actorloop <args...>` as a person would paste it, with `whereFlags` after the arguments;
 * placeholders go last, where a person types over them.
 */
export function cliLine(config: WhereConfig, ...args: Array<string | Placeholder>): string {
  const words = args.filter((a): a is string => typeof a === 'string').map(shellQuote);
  const holes = args.filter((a): a is Placeholder => typeof a !== 'string').map((a) => a.placeholder);
  return ['actorloop', ...words, ...whereFlags(config).map(shellQuote), ...holes].join(' ');
}

/** `cliLine` bound to one command's config, for code that prints lines but holds no config. */
export type CommandLine = (...args: Array<string | Placeholder>) => string;

/** The `CommandLine` of a command's config. */
export function lineFor(config: WhereConfig): CommandLine {
  return (...args) => cliLine(config, ...args);
}
