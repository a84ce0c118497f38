import { stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ToolError } from '../../protocol/errors.js';
import { DEFAULT_PATH, findExecutable, runProcess, sandboxEnv, type ProcessOutcome, type ProcessSandbox } from '../sandbox.js';
import { TOOL_STOP_CODES, type PreviewContext, type ToolContext, type ToolDefinition, type ToolPreview, type ToolResult } from '../tool.js';
import { shownWord } from '../approval-preview.js';
import { resolveInWorkspace } from '../workspace-path.js';

/** Timeout of one shell command when the call names none. */
export const DEFAULT_SHELL_TIMEOUT_MS = 120_000;
/** Largest `timeout_ms` a call may ask for. */
export const MAX_SHELL_TIMEOUT_MS = 600_000;
/** First line of the output of a command that ran without bubblewrap. */
export const UNSANDBOXED_NOTICE = '[not sandboxed: bubblewrap is unavailable here, so this command ran with full access to the host]';

const SHELL_VERSION = '1';

const ShellInput = z.strictObject({
  command: z.string().min(1).describe('The command line, run by bash -c (sh -c where bash is missing); pipes, && and redirections work'),
  cwd: z.string().min(1).optional().describe('Working directory relative to the workspace root (default ".")'),
  timeout_ms: z
    .number()
    .int()
    .min(1)
    .max(MAX_SHELL_TIMEOUT_MS)
    .optional()
    .describe(`Kill the command after this many milliseconds (default ${DEFAULT_SHELL_TIMEOUT_MS})`),
});
/** Input of `shell`. */
export type ShellInput = z.infer<typeof ShellInput>;

/**
 * `shell {command, cwd?, timeout_ms?}`: runs a command line in the workspace, under bubblewrap
 * when the grant has it. The output is bytes: a status line, stdout, then `[stderr]` and notes.
 */
export const shellTool: ToolDefinition<ShellInput> = {
  name: 'shell',
  version: SHELL_VERSION,
  description:
    'Run a shell command (bash -c) in the workspace and return its output. The first line is "exit code N" ' +
    '(or why it stopped), then stdout, then "[stderr]" and stderr. The filesystem outside the workspace is ' +
    'read-only, /tmp is private and emptied after the call, and there is no network unless granted.',
  input: ShellInput,
  level: 'execute',
  // A command can do anything; after a crash mid-call nobody knows what it did, so a person decides.
  executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'manual', on: 'ask' } }),
  resources: () => [{ key: 'process', mode: 'write' }],
  plan: (input, { workspace }) => ({
    tool: 'shell',
    version: SHELL_VERSION,
    command: input.command,
    cwd: relativeCwd(workspace, input.cwd),
    paths: [],
    network: false,
    envNames: [],
  }),
  preview: shellPreview,
  // Above the largest timeout_ms plus the kill grace, so the tool's own timeout (which keeps
  // partial output) fires before the pipeline's (which keeps none).
  timeoutMs: MAX_SHELL_TIMEOUT_MS + 15_000,
  async execute(input, ctx) {
    ctx.signal.throwIfAborted();
    const run = await shellInvocation(input.command, input.cwd, ctx);
    const outcome = await runProcess(run.argv, {
      cwd: run.cwd,
      env: run.env,
      signal: ctx.signal,
      timeoutMs: input.timeout_ms ?? DEFAULT_SHELL_TIMEOUT_MS,
      sandbox: run.sandbox,
    });
    return shellResult(outcome, run.sandbox !== null, input.timeout_ms ?? DEFAULT_SHELL_TIMEOUT_MS);
  },
};

/** How a command line runs: the argv, cwd, environment and containment `runProcess` takes. */
export interface ShellInvocation {
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  sandbox: ProcessSandbox | null;
}

/**
 * How `shell` runs `command` in `cwd` (relative to the workspace) under a call's grant; anything
 * else that runs a command line the way `shell` does (a background job) builds it here, so both
 * get the same sandbox, environment and cwd checks. Throws a ToolError for a cwd outside the
 * workspace, missing, or not a directory.
 */
export async function shellInvocation(command: string, cwdInput: string | undefined, ctx: Pick<ToolContext, 'workspace' | 'env' | 'sandbox'>): Promise<ShellInvocation> {
  const cwd = await resolveInWorkspace(ctx.workspace, cwdInput ?? '.', { mustExist: true });
  if (!(await stat(cwd)).isDirectory()) {
    throw new ToolError('tool.not_directory', `cwd ${JSON.stringify(cwdInput)} is not a directory; pass a directory relative to the workspace`);
  }
  const { bwrapPath } = ctx.sandbox;
  const env = processEnv(ctx.env, ctx.sandbox.envAllow, bwrapPath !== null);
  return {
    argv: [await shellPath(env.PATH), '-c', command],
    cwd,
    env,
    sandbox: bwrapPath ? { bwrapPath, workspace: ctx.workspace, network: ctx.sandbox.network, hide: ctx.sandbox.hide ?? [] } : null,
  };
}

/** The cwd as the plan records it: relative to the workspace, `/`-separated, "." for the root; lexical only. */
export function relativeCwd(workspace: string, cwd: string | undefined): string {
  const rel = path.relative(path.resolve(workspace), path.resolve(workspace, cwd ?? '.'));
  return rel === '' ? '.' : rel.split(path.sep).join('/');
}

/**
 * What approving `shell` runs: the command line as sent, the argv of each simple command the
 * parser found in it, the cwd, the names (never the values) of the environment the process gets,
 * network, and whether bubblewrap contains it. An asked call is granted no `env_allow` names and
 * no network (only an allow rule grants those), which is what is shown.
 */
export function shellPreview(input: ShellInput, ctx: PreviewContext): ToolPreview {
  const commands = ctx.plan.commands ?? [];
  const env = Object.keys(processEnv(ctx.env, [], ctx.sandboxed)).sort();
  const lines = [`command: ${input.command}`];
  if (commands.length > 0) lines.push(...commands.map((argv) => `runs: ${argv.map(shownWord).join(' ')}`));
  else lines.push('runs: (the parser found no simple command in it)');
  lines.push(
    `cwd: ${ctx.plan.cwd ?? relativeCwd(ctx.workspace, input.cwd)}`,
    `environment (names only): ${env.join(' ')}`,
    `network: ${ctx.plan.network ? 'yes' : 'no'}`,
    ctx.sandboxed
      ? 'sandboxed: yes (bubblewrap: read-only root, the workspace writable, private /tmp)'
      : 'sandboxed: NO (bubblewrap is unavailable here: the command runs with full access to the host)',
    `timeout: ${input.timeout_ms ?? DEFAULT_SHELL_TIMEOUT_MS} ms`,
  );
  const n = commands.length;
  const summary = `${n} command${n === 1 ? '' : 's'}, ${ctx.sandboxed ? 'sandboxed' : 'NOT sandboxed'}, ${ctx.plan.network ? 'network' : 'no network'}`;
  return { kind: 'command', summary, text: lines.join('\n') };
}

/**
 * The rendering the model sees, as bytes (output may be binary):
 * an optional UNSANDBOXED_NOTICE line; a status line (`exit code N`, `killed by SIGNAL`,
 * `timed out after N ms; the process tree was killed`, `cancelled; ...`); stdout verbatim;
 * `[stderr]` and stderr verbatim when there is any; `[stdout truncated: ...]` notes;
 * `(no output)` when both streams were empty.
 */
export function shellResult(outcome: ProcessOutcome, sandboxed: boolean, timeoutMs: number): ToolResult {
  const status = statusLine(outcome, timeoutMs);
  const parts: Uint8Array[] = [];
  const text = (s: string): void => {
    parts.push(Buffer.from(s, 'utf8'));
  };
  if (!sandboxed) text(`${UNSANDBOXED_NOTICE}\n`);
  text(`${status}\n`);
  const section = (bytes: Uint8Array): void => {
    parts.push(bytes);
    if (bytes.length > 0 && bytes[bytes.length - 1] !== 0x0a) text('\n');
  };
  section(outcome.stdout);
  if (outcome.stderr.length > 0) {
    text('[stderr]\n');
    section(outcome.stderr);
  }
  if (outcome.stdout.length === 0 && outcome.stderr.length === 0) text('(no output)\n');
  if (outcome.stdoutBytes > outcome.stdout.length) text(truncationNote('stdout', outcome.stdout.length, outcome.stdoutBytes));
  if (outcome.stderrBytes > outcome.stderr.length) text(truncationNote('stderr', outcome.stderr.length, outcome.stderrBytes));
  const output = Buffer.concat(parts);

  if (outcome.timedOut) return { ok: false, output, error: { code: 'tool.timeout', message: status } };
  // cancelled confirms the tree stopped; a process that escaped the kill may still be at work
  if (outcome.aborted && outcome.stray) return { ok: false, output, error: { code: TOOL_STOP_CODES.notStopped, message: status } };
  if (outcome.aborted) return { ok: false, output, error: { code: 'tool.cancelled', message: status } };
  if (outcome.exitCode === 0) return { ok: true, output };
  return { ok: false, output, error: { code: 'tool.exit_nonzero', message: `the command ended with ${status}` } };
}

function statusLine(outcome: ProcessOutcome, timeoutMs: number): string {
  const escaped = 'a process it started left its group and could not confirm it stopped';
  if (outcome.timedOut && outcome.stray) return `timed out after ${timeoutMs} ms; the process tree was killed, but ${escaped}`;
  if (outcome.timedOut) return `timed out after ${timeoutMs} ms; the process tree was killed (pass a larger timeout_ms if it needs longer)`;
  if (outcome.aborted && outcome.stray) return `cancelled; the process tree was killed, but ${escaped}`;
  if (outcome.aborted) return 'cancelled; the process tree was killed';
  if (outcome.exitCode !== null) return `exit code ${outcome.exitCode}`;
  return `killed by ${outcome.signal ?? 'an unknown signal'}`;
}

function truncationNote(stream: string, kept: number, total: number): string {
  return `[${stream} truncated: showing the first ${kept} of ${total} bytes; redirect to a file in the workspace and read parts of it]\n`;
}

/**
 * The command's environment: the host's without secrets, with PATH and HOME defaulted. Under
 * bwrap TMPDIR is the private /tmp, since a host TMPDIR elsewhere is read-only there.
 */
function processEnv(host: Readonly<Record<string, string>>, envAllow: readonly string[], sandboxed: boolean): Record<string, string> {
  const env = sandboxEnv(host, envAllow);
  if (!env.PATH) env.PATH = DEFAULT_PATH;
  if (!env.HOME) env.HOME = '/tmp';
  if (sandboxed) env.TMPDIR = '/tmp';
  return env;
}

// bash for what models write (arrays, [[ ]], pipefail); sh where it is missing (Alpine, distroless).
async function shellPath(pathEnv: string | undefined): Promise<string> {
  const search = `${pathEnv ?? ''}${path.delimiter}${DEFAULT_PATH}`;
  const found = (await findExecutable('bash', search)) ?? (await findExecutable('sh', search));
  if (!found) throw new ToolError('tool.spawn_failed', 'neither bash nor sh was found on PATH; install bash or fix PATH');
  return found;
}
