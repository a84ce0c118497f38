import { spawn } from 'node:child_process';
import { REPO_ROOT } from './cli.js';

/** A command running on a pseudo-terminal (`script -qfec`), as in a person's shell. */
export interface Terminal {
  /** Everything the command drew so far, escape sequences and CRs included. */
  readonly screen: string;
  /** Resolves with the exit code once the command (and `script`) ended. */
  readonly closed: Promise<number | null>;
  /** Resolves once the screen holds `text`. */
  until(text: string): Promise<void>;
  /** Calls `fn` once, as soon as the screen holds `text`, with the screen as it was then. */
  once(text: string, fn: (screenThen: string) => void): void;
  /** Types `text` (a line ends with `\r`, as Enter sends it). */
  type(text: string): void;
  ctrlC(): void;
}

/**
 * Runs `cmd` (the words of a shell command, joined with spaces) on a pty from the repository
 * root, with `env`; SIGKILLed when the test finishes if it is still running.
 */
export function onTerminal(cmd: string[], env: NodeJS.ProcessEnv, onTestFinished: (fn: () => Promise<void>) => void): Terminal {
  const child = spawn('script', ['-qfec', cmd.join(' '), '/dev/null'], { cwd: REPO_ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  onTestFinished(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let screen = '';
  const watchers = new Set<() => void>();
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    screen += chunk;
    for (const w of [...watchers]) w();
  });
  const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
  const once = (text: string, fn: (screenThen: string) => void): void => {
    const check = (): void => {
      if (!screen.includes(text)) return;
      watchers.delete(check);
      fn(screen);
    };
    watchers.add(check);
    check();
  };
  return {
    get screen() {
      return screen;
    },
    closed,
    until: (text) => new Promise<void>((resolve) => once(text, () => resolve())),
    once,
    type: (text) => child.stdin.write(text),
    ctrlC: () => child.stdin.write('\x03'),
  };
}
