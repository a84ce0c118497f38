// Key material read in slices never reaches the store or the logs (issue 13, item 5): the real CLI,
// on the embedded nats-server in a temp data dir, runs a scripted model that pages into a key with
// read_file, cuts it with sed, grep and tail under bubblewrap, and searches it; then every byte of
// the data dir (JetStream store, LMDB, blobs, server log) and every log line is searched for the
// key's body lines and the configured secret values.
import { generateKeyPairSync } from 'node:crypto';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { natsServerVersion } from '../../src/bus/nats-server.js';
import { AGENT_ID, cliEnv, lines, parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const stack = useCliStack({ nats: false });

// Values that match no built-in pattern: only `redact_env` and the API-key variable redact them.
const PASSPHRASE = 'correct horse battery staple 42';
const API_KEY = 'plain-api-key-value-0123456789';

/** Every file under `dir`, as raw bytes. */
async function filesUnder(dir: string): Promise<{ path: string; bytes: Buffer }[]> {
  const out: { path: string; bytes: Buffer }[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    out.push({ path, bytes: await readFile(path) });
  }
  return out;
}

test('key body lines read by offset, sed, grep -v, tail and search are redacted before the log, LMDB and the logs', async ({ onTestFinished }) => {
  await natsServerVersion(); // the embedded default needs the binary
  const ws = await stack.dir('ws');
  const dataDir = await stack.dir('data');
  const scriptDir = await stack.dir('script');

  // made now, never committed: a real RSA key in the PKCS#8 PEM a tool would find in a repo
  const pem = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const pemLines = pem.trimEnd().split('\n');
  // the short last line too, unless it is so short that it could occur by chance in other bytes
  const body = pemLines.filter((l) => !l.startsWith('-----') && l.length >= 16);
  expect(body.length).toBeGreaterThan(20);
  await writeFile(join(ws, 'key.pem'), pem);
  await writeFile(join(ws, 'deploy.env'), `passphrase: ${PASSPHRASE}\napi: ${API_KEY}\n`);
  await mkdir(join(dataDir, 'config-home', 'actorloop'), { recursive: true });
  await writeFile(join(dataDir, 'config-home', 'actorloop', 'config.toml'), 'redact_env = ["DEPLOY_PASSPHRASE"]\n');

  const total = pemLines.length;
  const call = (name: string, args: Record<string, unknown>) => ({ name, arguments: args });
  const script = {
    responses: [
      { tool_calls: [call('read_file', { path: 'key.pem', offset: 3, limit: 4 }), call('read_file', { path: 'key.pem', offset: total - 4, limit: 10 })] },
      { tool_calls: [call('shell', { command: "sed -n '3,6p' key.pem" })] },
      { tool_calls: [call('shell', { command: 'grep -v -- ----- key.pem' })] },
      { tool_calls: [call('shell', { command: 'tail -c 300 key.pem; grep -n -A3 BEGIN key.pem | tail -n 3' })] },
      { tool_calls: [call('search', { pattern: '^[A-Za-z0-9+/]+$', path: 'key.pem' }), call('read_file', { path: 'deploy.env' })] },
      { content: 'I read the key and the deploy settings.' },
    ],
  };
  const scriptPath = join(scriptDir, 'script.json');
  await writeFile(scriptPath, JSON.stringify(script));

  const env = cliEnv(dataDir, { ACTORLOOP_LOG: 'debug', DEPLOY_PASSPHRASE: PASSPHRASE, OPENAI_API_KEY: API_KEY });
  const cli = stack.pool.forTest({ onTestFinished }, env);
  const run = await cli.run(['run', 'Read key.pem', '--model', `scripted:${scriptPath}`, '--approve', 'full-auto', '--cwd', ws, '--json'], {
    timeoutMs: 60_000,
  });
  expect({ code: run.code, signal: run.signal }, show(run)).toEqual({ code: 0, signal: null });
  const agentId = lines(run.stderr).find((l) => AGENT_ID.test(l));
  expect(agentId, show(run)).toBeDefined();

  const events = await cli.run(['events', agentId!, '--json']);
  expect(events.code, show(events)).toBe(0);
  const results = parseEvents(events.stdout).flatMap((e) => (e.type === 'tool/result' ? [e.data] : []));
  expect(results.map((r) => r.ok)).toEqual([true, true, true, true, true, true, true]);
  expect(results.every((r) => (r.redactions ?? 0) > 0), JSON.stringify(results, null, 1)).toBe(true);
  expect(events.stdout).toContain('[REDACTED:key_block]');
  expect(events.stdout).toContain('[REDACTED:configured]');

  const stored = await filesUnder(dataDir);
  expect(stored.some((f) => f.path.includes(join(dataDir, 'nats')))).toBe(true);
  // the store holds tool output as plain bytes, so a search of it would find a leaked line
  expect(stored.some((f) => f.bytes.includes('[lines 3-6 of')), 'a read_file header in the raw store').toBe(true);
  const places = [
    ...stored,
    { path: 'run stderr', bytes: Buffer.from(run.stderr) },
    { path: 'run stdout', bytes: Buffer.from(run.stdout) },
    { path: 'events stderr', bytes: Buffer.from(events.stderr) },
    { path: 'events stdout', bytes: Buffer.from(events.stdout) },
  ];
  const leaks = places.flatMap((p) =>
    [...body, PASSPHRASE, API_KEY].filter((secret) => p.bytes.includes(secret)).map((secret) => `${p.path}: ${secret}`),
  );
  expect(leaks).toEqual([]);
}, 120_000);
