// The gateway's token in a real temp data dir: made owner-only on first use and the same ever
// after, a looser mode left by someone else made owner-only again, a file without a token refused
// with what to do, and a client that may not read it finds none (the gateway then answers 401).
import { chmod, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { ensureGatewayToken, findGatewayToken, gatewayTokenPath } from '../../src/server/gateway-token.js';
import { tempDir } from '../helpers/nats.js';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

async function dataDir(): Promise<string> {
  const d = await tempDir('gw-token');
  dirs.push(d);
  return d;
}

test('the first use makes a long random token, 0600 in a 0700 directory; later uses and clients get the same one', async () => {
  const d = await dataDir();
  expect(findGatewayToken(d)).toEqual({ token: null, file: gatewayTokenPath(d) });
  const first = ensureGatewayToken(d);
  expect(first.file).toBe(gatewayTokenPath(d));
  expect(first.token.length).toBeGreaterThanOrEqual(32);
  expect((await stat(join(d, 'gateway'))).mode & 0o777).toBe(0o700);
  expect((await stat(first.file)).mode & 0o777).toBe(0o600);
  expect(ensureGatewayToken(d)).toEqual(first);
  expect(findGatewayToken(d)).toEqual(first);
  expect(ensureGatewayToken(await dataDir()).token).not.toBe(first.token);
});

test('a directory or file another hand left readable is made owner-only again, keeping the token', async () => {
  const d = await dataDir();
  await mkdir(join(d, 'gateway'), { mode: 0o755 });
  await writeFile(gatewayTokenPath(d), 'a-token-someone-wrote-0123456789\n', { mode: 0o644 });
  await chmod(join(d, 'gateway'), 0o755);
  await chmod(gatewayTokenPath(d), 0o644);
  expect(ensureGatewayToken(d).token).toBe('a-token-someone-wrote-0123456789');
  expect((await stat(join(d, 'gateway'))).mode & 0o777).toBe(0o700);
  expect((await stat(gatewayTokenPath(d))).mode & 0o777).toBe(0o600);
});

test('a token file without a token is refused, saying what to do; it is left as it is', async () => {
  const d = await dataDir();
  await mkdir(join(d, 'gateway'), { mode: 0o700 });
  await writeFile(gatewayTokenPath(d), 'short\n', { mode: 0o600 });
  expect(() => ensureGatewayToken(d)).toThrow(expect.objectContaining({ code: 'gateway.token_invalid', hint: expect.stringContaining('remove the file') }));
  expect(await readFile(gatewayTokenPath(d), 'utf8')).toBe('short\n');
  expect(findGatewayToken(d).token).toBeNull();
});
