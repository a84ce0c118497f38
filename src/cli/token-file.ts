import { readFileSync } from 'node:fs';
import { ConfigError } from '../protocol/errors.js';
import { MIN_TOKEN_LENGTH } from '../server/gateway-token.js';

/** The bearer token in a file (its first line, trimmed); one line and exit 2 when it cannot be read or is empty. */
export function readToken(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError('gateway.token_unreadable', `cannot read the token file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, {
      hint: 'pass --token-file <a file holding the token>, e.g. made with: openssl rand -hex 32 > token && chmod 600 token',
    });
  }
  const token = text.split(/\r?\n/)[0]!.trim();
  if (token.length < MIN_TOKEN_LENGTH) {
    throw new ConfigError('gateway.token_weak', `the token in ${file} is ${token.length === 0 ? 'empty' : 'shorter than 16 characters'}`, {
      hint: 'write a long random token to it: openssl rand -hex 32 > token',
    });
  }
  return token;
}
