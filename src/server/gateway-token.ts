import { randomBytes } from 'node:crypto';
import { chmodSync, linkSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../protocol/errors.js';

// The gateway speaks for its owner, so it takes requests only from who can read its token (design
// §11): generated on first start into the data dir, owner-only like the bus logins beside it, and
// read from there by the owner's CLI. Another user of the machine cannot read it, so cannot submit,
// read or steer through the gateway.

/** The shortest token `serve --token-file` takes. */
export const MIN_TOKEN_LENGTH = 16;

/** Where a data dir's gateway token is kept (the directory is the owner's alone). */
export function gatewayTokenPath(dataDir: string): string {
  return join(dataDir, 'gateway', 'token');
}

/** A token and the file it is kept in. */
export interface GatewayToken {
  token: string;
  file: string;
}

/**
 * The data dir's gateway token: read when there is one, else generated (random, mode 0600 in a
 * 0700 directory) and kept for every later start. Two gateways starting at once get the same one.
 */
export function ensureGatewayToken(dataDir: string): GatewayToken {
  const file = gatewayTokenPath(dataDir);
  const dir = join(dataDir, 'gateway');
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // made by someone else or an older version with a looser mode: the token must be the owner's alone
    chmodSync(dir, 0o700);
    const existing = readTokenFile(file);
    if (existing !== null) {
      if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
      return { token: existing, file };
    }
    // Written aside (0600), then linked into place: a link fails if the file exists (as O_EXCL
    // would), so of two gateways starting at once the first one's token is both's, and nobody
    // reads a file half written.
    const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    writeFileSync(tmp, `${randomBytes(32).toString('base64url')}\n`, { mode: 0o600 });
    try {
      linkSync(tmp, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      try {
        unlinkSync(tmp);
      } catch {
        // gone already: nothing to clean
      }
    }
    const token = readTokenFile(file);
    if (token === null) {
      throw new ConfigError('gateway.token_invalid', `${file} holds no token (${MIN_TOKEN_LENGTH} characters or more on its first line)`, {
        hint: 'stop every `actorloop serve` of this data dir, remove the file and start again (a new token is generated)',
      });
    }
    return { token, file };
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError('gateway.token_unwritable', `cannot keep the gateway's token in ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, {
      hint: 'run `actorloop serve` as the user who owns the data dir (or pass --data-dir <a directory of yours>)',
      cause: err,
    });
  }
}

/**
 * The data dir's gateway token as a client finds it: null when there is none or this user may
 * not read it (another user's data dir), which the gateway then answers with 401.
 */
export function findGatewayToken(dataDir: string): { token: string | null; file: string } {
  const file = gatewayTokenPath(dataDir);
  try {
    return { token: readTokenFile(file), file };
  } catch {
    return { token: null, file };
  }
}

/** A token file's first line, trimmed; null when the file does not exist or holds too short a token. */
function readTokenFile(file: string): string | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const token = text.split(/\r?\n/)[0]!.trim();
  return token.length >= MIN_TOKEN_LENGTH ? token : null;
}
