import { mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { configFilePaths, environmentOf, type EffectiveConfig } from '../../config/config.js';
import { readConfigFile } from '../../config/config-file.js';
import { workspaceKey } from '../../config/workspace-trust.js';
import { ConfigError } from '../../protocol/errors.js';
import type { Out } from '../output.js';
import { terminalText } from '../../client/terminal-text.js';

/** Options of `actorloop trust`. */
export interface TrustOptions {
  revoke?: boolean;
  json?: boolean;
}

/**
 * `actorloop trust [dir]`: records in the user's config file that the workspace's actorloop.toml
 * may set everything (endpoints, allow rules, a looser run mode), as `[workspaces."<dir>"]
 * trusted = true`; `--revoke` removes that table. The table is appended or cut out as text, so
 * the rest of the file, comments included, stays as the user wrote it.
 */
export async function trustCommand(dirArg: string | undefined, opts: TrustOptions, config: EffectiveConfig, out: Out): Promise<number> {
  const dir = workspaceKey(dirArg ?? process.cwd());
  const isDir = await stat(dir).then((s) => s.isDirectory(), () => false);
  if (!isDir && !opts.revoke) {
    throw new ConfigError('cli.not_a_directory', `${dir} is not a directory`, { hint: 'name the workspace directory whose actorloop.toml you trust' });
  }
  const userFile = configFilePaths(dir, environmentOf(config)).user;
  const current = readConfigFile(userFile);
  const trusted = current?.workspaces?.[dir]?.trusted === true;
  const text = await readFile(userFile, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return '';
    throw err;
  });
  let changed = false;
  if (opts.revoke) {
    if (current?.workspaces?.[dir] !== undefined) {
      const next = removeTable(text, dir);
      if (next === null) {
        throw new ConfigError('cli.trust_unedited', `${userFile} names ${dir} in a form this command does not edit`, {
          hint: `remove its [workspaces.${JSON.stringify(dir)}] entry by hand`,
        });
      }
      await writeAtomic(userFile, next);
      changed = true;
    }
  } else if (!trusted) {
    if (current?.workspaces?.[dir] !== undefined) {
      throw new ConfigError('cli.trust_unedited', `${userFile} already has an entry for ${dir} (trusted = false)`, {
        hint: `set trusted = true in its [workspaces.${JSON.stringify(dir)}] table, or remove it and run this again`,
      });
    }
    const sep = text === '' || text.endsWith('\n\n') ? '' : text.endsWith('\n') ? '\n' : '\n\n';
    await writeAtomic(userFile, `${text}${sep}[workspaces.${JSON.stringify(dir)}]\ntrusted = true\n`);
    changed = true;
  }
  // what was written must read back as meant: a file this command broke is worse than none
  const after = readConfigFile(userFile);
  const nowTrusted = after?.workspaces?.[dir]?.trusted === true;
  if (nowTrusted === Boolean(opts.revoke)) throw new ConfigError('cli.trust_failed', `${userFile} did not take the change`, { hint: 'check the file by hand' });
  if (opts.json) {
    out.stdout.write(`${JSON.stringify({ workspace: dir, trusted: nowTrusted, changed, file: userFile })}\n`);
  } else {
    const what = opts.revoke
      ? changed ? 'no longer trusted: its actorloop.toml may only tighten again' : 'was not trusted'
      : changed ? 'trusted: its actorloop.toml may now set every key' : 'was already trusted';
    out.stdout.write(`${terminalText(dir, 'line')}: ${what} (${terminalText(userFile, 'line')})\n`);
  }
  return 0;
}

/** The file without the `[workspaces."<dir>"]` table, or null when it is not there as a plain table. */
function removeTable(text: string, dir: string): string | null {
  const lines = text.split('\n');
  const header = `[workspaces.${JSON.stringify(dir)}]`;
  const start = lines.findIndex((l) => l.trim() === header);
  if (start < 0) return null;
  let end = start + 1;
  while (end < lines.length && !/^\s*\[/.test(lines[end]!)) end += 1;
  // keep the comments and blank lines that lead into the next table
  while (end > start + 1 && (lines[end - 1]!.trim() === '' || lines[end - 1]!.trim().startsWith('#'))) end -= 1;
  const rest = [...lines.slice(0, start), ...lines.slice(end)].join('\n').replace(/\n{3,}/g, '\n\n');
  // the blank line `trust` put before the table goes with it
  return rest.trim() === '' ? '' : rest.replace(/\n+$/, '\n');
}

async function writeAtomic(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, text, { mode: 0o600 });
  await rename(tmp, path);
}
