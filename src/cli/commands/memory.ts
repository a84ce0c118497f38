import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, stat, unlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import { terminalText } from '../../client/terminal-text.js';
import { configFilePaths, environmentOf, loadConfig, type EffectiveConfig } from '../../config/config.js';
import {
  MEMORY_CODES, memoryHeading, memoryPaths, readMemory, writeMemory, type MemoryFile, type MemoryPaths, type MemorySnapshot,
} from '../../knowledge/memory.js';
import { ConfigError, hasCode } from '../../protocol/errors.js';
import type { CommandKit } from '../command-kit.js';
import { EXIT } from '../exit-codes.js';
import type { Out } from '../output.js';

/** Options of `actorloop memory`. */
export interface MemoryOptions {
  json?: boolean;
  /** `--edit` alone is `true` (MEMORY.md); `--edit user` opens USER.md. */
  edit?: MemoryFile | true;
}

const NAMES: Record<MemoryFile, string> = { memory: 'MEMORY.md', user: 'USER.md' };

/** `--edit [file]`: `memory` (the default) or `user`. */
function parseEditTarget(value: string): MemoryFile {
  if (value === 'memory' || value === 'user') return value;
  throw new InvalidArgumentError(`--edit takes memory (MEMORY.md, the default) or user (USER.md), got "${value}"`);
}

/** Adds `actorloop memory` to the program. */
export function registerMemoryCommand(program: Command, kit: CommandKit): Command {
  const { common, flags, act, out } = kit;
  return common(program.command('memory'))
    .description("show what agents remember of a workspace (MEMORY.md) and of you (USER.md): paths, versions and contents; --edit opens one in $EDITOR")
    .option('--cwd <dir>', 'the workspace (default: the current directory)')
    .option('--json', 'one JSON object')
    .option('--edit [file]', 'open MEMORY.md (or with `user`, USER.md) in $EDITOR, creating it with its heading', parseEditTarget)
    // flags() reads --cwd too, as for `config show`: the workspace whose memory it is
    .action(act(async (o: MemoryOptions & { cwd?: string; config?: string[] }) => memoryCommand(o, loadConfig(flags(o)), out)));
}

/**
 * `actorloop memory [--cwd DIR] [--json] [--edit [user]]`: the memory files of the workspace the
 * config was loaded for (kept under the user's config dir, never in the repository), each with
 * its path, whether it exists, its version and size, then its contents.
 */
export async function memoryCommand(opts: MemoryOptions, config: EffectiveConfig, out: Out): Promise<number> {
  const dir = config.workspace.dir;
  const isDir = await stat(dir).then((s) => s.isDirectory(), () => false);
  if (!isDir) throw new ConfigError('cli.not_a_directory', `${dir} is not a directory`, { hint: 'pass the workspace with --cwd' });
  const env = environmentOf(config);
  // the user's config dir, found as the user's config.toml is: $XDG_CONFIG_HOME/actorloop, else ~/.config/actorloop
  const paths = memoryPaths(dir, dirname(configFilePaths(dir, env).user));
  if (opts.edit !== undefined) await editInEditor(paths, opts.edit === true ? 'memory' : opts.edit, env, out);
  const files = [await readMemory(paths, 'memory'), await readMemory(paths, 'user')];
  if (opts.json) {
    const json = (s: MemorySnapshot) => ({ path: s.path, exists: s.exists, digest: s.digest, bytes: s.bytes, content: s.content });
    out.stdout.write(`${JSON.stringify({ workspace: dir, workspaceKey: paths.workspaceKey, memory: json(files[0]!), user: json(files[1]!) })}\n`);
    return EXIT.completed;
  }
  const t = (s: string) => terminalText(s, 'line');
  const lines = [`workspace: ${t(dir)}`];
  for (const s of files) {
    lines.push('', `${NAMES[s.file]} (${s.file === 'memory' ? 'this workspace' : 'you, in every workspace'}): ${t(s.path)}`);
    if (!s.exists) {
      lines.push(`  does not exist yet: agents write it with the memory tool; \`actorloop memory --edit${s.file === 'user' ? ' user' : ''}\` writes it by hand`);
      continue;
    }
    lines.push(`  ${s.digest} · ${s.bytes} bytes`, '', terminalText(s.content.replace(/\n$/, ''), 'block'));
  }
  out.stdout.write(`${lines.join('\n')}\n`);
  return EXIT.completed;
}

/**
 * Opens a memory file in the user's editor. The editor works on a copy, so agents adding
 * entries meanwhile are not kept waiting on the lock; what the person saved is written under the
 * lock only if the file is still the version copied, else it is kept beside it and the command
 * says so: neither the agent's entry nor the person's edit is lost.
 */
async function editInEditor(paths: MemoryPaths, file: MemoryFile, env: Readonly<Record<string, string>>, out: Out): Promise<void> {
  const editor = (env.EDITOR ?? '').trim() || (env.VISUAL ?? '').trim();
  if (editor === '') throw new ConfigError('cli.no_editor', 'no editor to open the memory file with', { hint: 'set EDITOR (for example EDITOR=vi), or edit the file shown by `actorloop memory`' });
  let snap = await readMemory(paths, file);
  if (!snap.exists) {
    snap = await writeMemory(paths, file, memoryHeading(file), { expectedDigest: '' }).then(
      (r) => r.after,
      async (err: unknown) => {
        // created by an agent just now: edit what it wrote
        if (hasCode(err, MEMORY_CODES.conflict)) return readMemory(paths, file);
        throw err;
      },
    );
  }
  const copy = join(dirname(snap.path), `.${NAMES[file]}.edit-${process.pid}-${randomBytes(4).toString('hex')}.md`);
  await writeFile(copy, snap.content, { mode: 0o600, flag: 'wx' });
  let keep = false;
  try {
    // through sh: EDITOR may carry arguments (`code --wait`); the file reaches it as "$1", never as shell text
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn('/bin/sh', ['-c', `${editor} "$1"`, 'sh', copy], { stdio: 'inherit', env: { ...env } });
      child.once('error', reject);
      child.once('close', resolve);
    });
    if (code !== 0) throw new ConfigError('cli.editor_failed', `the editor (${editor}) exited with ${code}; ${NAMES[file]} was not changed`, { hint: 'check EDITOR' });
    const edited = await readFile(copy, 'utf8');
    if (edited === snap.content) return;
    try {
      const saved = await writeMemory(paths, file, edited, { expectedDigest: snap.digest });
      out.stderr.write(`actorloop: saved ${terminalText(saved.after.path, 'line')} (${saved.after.digest})\n`);
    } catch (err) {
      if (!hasCode(err, MEMORY_CODES.conflict) && !hasCode(err, MEMORY_CODES.tooLarge)) throw err;
      keep = true;
      const why = hasCode(err, MEMORY_CODES.conflict) ? `${NAMES[file]} changed while you edited it (an agent added to it)` : (err as Error).message;
      throw new ConfigError('cli.memory_not_saved', `${why}; your version was not saved over it and is kept at ${copy}`, {
        hint: 'run `actorloop memory --edit` again and bring your change over from that file',
      });
    }
  } finally {
    if (!keep) await unlink(copy).catch(() => undefined);
  }
}
