import type { Command } from 'commander';
import type { ConfigFlags } from '../config/config.js';
import type { Out } from './output.js';

/** What `buildProgram` lends a command it does not define itself. */
export interface CommandKit {
  /** Adds `--data-dir`, `--nats` and `-c key=value`. */
  common(cmd: Command): Command;
  /** The config flags of parsed options. */
  flags(o: { dataDir?: string; nats?: string; config?: string[] }): ConfigFlags;
  /** Wraps an action so its resolved number becomes the exit code. */
  act<A extends unknown[]>(fn: (...args: A) => Promise<number>): (...args: A) => Promise<void>;
  out: Out;
}
