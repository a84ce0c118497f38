// The gateway is its owner's alone: a real `actorloop host` and `actorloop serve` with no flags
// on the owner's data dir (0700, as a temp dir is), the owner's CLI with `--gateway` and nothing
// else, and another user of the machine (`runuser -u nobody`) trying every way in: the token file,
// every HTTP read, the event stream, and turn.submit, inbox.send, turn.interrupt over the
// WebSocket, and the CLI pointed at the owner's data dir. None of it gets through, and nothing is
// submitted. A `turn.submit` asking for a looser run mode than the owner's config is refused.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmod, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { AGENT_ID, CliPool, DEMO_SCRIPT, REPO_ROOT, cliEnv, demoWorkspace, lines, parseEvents, parseRuns, show } from '../helpers/cli.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { waitUntil } from '../helpers/processes.js';
import { servedUrl } from '../helpers/serve-output.js';
import { gatewayTokenPath } from '../../src/server/gateway-token.js';

const TASK = 'The test in test/slug.test.js fails. Find the bug in src/slug.js, fix it, and tell me what was wrong.';
const PROBE = join(REPO_ROOT, 'test', 'fixtures', 'other-user', 'probe.mjs');

let nats: TestNats;
let url = '';
let dataDir = '';
let serveErr = '';
const started: ChildProcess[] = [];
const dirs: string[] = [];
const pool = new CliPool();

/** Why this machine cannot run a program as `nobody` here, or null when it can. */
function nobodyUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'the tests do not run as root, so they cannot switch to another user';
  const r = spawnSync('runuser', ['-u', 'nobody', '--', process.execPath, '-e', `require(${JSON.stringify(join(REPO_ROOT, 'node_modules', 'ws'))})`], { encoding: 'utf8' });
  if (r.error) return `runuser is not available (${r.error.message})`;
  if (r.status !== 0) return `nobody cannot run node on this repository: ${r.stderr.trim().split('\n')[0]}`;
  return null;
}
const NOBODY = nobodyUnavailable();
if (NOBODY !== null) process.stderr.write(`gateway-owner-only: skipping the other-user test: ${NOBODY}\n`);

function spawnCli(args: string[], dir: string, onOut?: (s: string) => void, onErr?: (s: string) => void): ChildProcess {
  const child = spawn(process.execPath, ['bin/actorloop.js', ...args], { cwd: REPO_ROOT, env: cliEnv(dir), stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.setEncoding('utf8').on('data', (s: string) => onOut?.(s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => onErr?.(s));
  started.push(child);
  return child;
}

beforeAll(async () => {
  nats = await startTestNats();
  const hostDir = await tempDir('own-host');
  dataDir = await tempDir('own-serve');
  dirs.push(hostDir, dataDir);
  let hostErr = '';
  spawnCli(['host', '--name', 'own-host', '--nats', nats.url, '--data-dir', hostDir], hostDir, undefined, (s) => (hostErr += s));
  let serveOut = '';
  // the owner's config lets edits run unasked; nothing says anything about the token
  spawnCli(['serve', '--port', '0', '-c', 'approval_mode=auto-edit', '--nats', nats.url, '--data-dir', dataDir], dataDir, (s) => (serveOut += s), (s) => (serveErr += s));
  const up = await waitUntil(() => hostErr.includes('hosting agents') && servedUrl(serveOut) !== null, 30_000);
  if (!up) throw new Error(`host or gateway did not start:\n${hostErr}\n${serveErr}`);
  url = servedUrl(serveOut)!;
}, 60_000);

afterAll(async () => {
  await pool.killAll();
  await Promise.all(started.map((c) => new Promise<void>((resolve) => {
    if (c.exitCode !== null || c.signalCode !== null) return resolve();
    c.once('exit', () => resolve());
    c.kill('SIGTERM');
  })));
  await nats?.stop();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

/** The owner's agents, as the owner's local `runs` lists them. */
async function ownersAgents(cli: ReturnType<CliPool['forTest']>): Promise<string[]> {
  const r = await cli.run(['runs', '--json', '--nats', nats.url, '--data-dir', dataDir]);
  expect(r.code, show(r)).toBe(0);
  return parseRuns(r.stdout).map((e) => e.actorId).sort();
}

test('the owner\'s CLI finds the token in its data dir: run and send --gateway work with no other flag; a looser run mode than the config\'s is refused', async ({ onTestFinished }) => {
  const ws = await demoWorkspace();
  dirs.push(ws);
  const cli = pool.forTest({ onTestFinished }, cliEnv(dataDir));
  const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws, '--gateway', url]);
  expect({ code: run.code, signal: run.signal }, `${show(run)}\nserve:\n${serveErr}`).toEqual({ code: 0, signal: null });
  const agentId = lines(run.stdout)[0]!;
  expect(agentId).toMatch(AGENT_ID);
  expect(run.stdout).toContain('completed');
  const send = await cli.run(['send', agentId, 'a note from the owner', '--inject', '--gateway', url]);
  expect(send.code, show(send)).toBe(0);
  const events = await cli.run(['events', agentId, '--json', '--gateway', url]);
  expect(events.code, show(events)).toBe(0);
  expect(events.stdout).toContain('a note from the owner');

  // full-auto is looser than the owner's auto-edit: refused, one line naming the flag that allows it
  const before = await ownersAgents(cli);
  const loose = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'full-auto', '--cwd', ws, '--gateway', url]);
  expect(loose.code, show(loose)).toBe(2);
  expect(lines(loose.stderr)).toHaveLength(1);
  expect(loose.stderr).toContain('approve "full-auto" is looser than this gateway\'s approval_mode "auto-edit"');
  expect(loose.stderr).toContain('--allow-looser-policy');
  expect(await ownersAgents(cli)).toEqual(before);
}, 90_000);

test.skipIf(NOBODY !== null)('another user of the machine cannot read the token, and so cannot submit, read, steer or interrupt through the gateway', async ({ onTestFinished }) => {
  const ws = await demoWorkspace();
  // nobody's own home and config: readable by nobody, so what stops it is the gateway, not a file it cannot open
  const home = await tempDir('own-nobody');
  dirs.push(ws, home);
  await chmod(home, 0o777);
  const cli = pool.forTest({ onTestFinished }, cliEnv(dataDir));
  // a turn of the owner's, parked for an approval: something to read, steer and interrupt
  const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'ask', '--cwd', ws, '--gateway', url]);
  expect(run.code, `${show(run)}\nserve:\n${serveErr}`).toBe(5);
  const agentId = lines(run.stdout)[0]!;
  const agentsBefore = await ownersAgents(cli);
  const eventsBefore = parseEvents((await cli.run(['events', agentId, '--json', '--gateway', url])).stdout).length;

  const asNobody = (args: string[]) => spawnSync('runuser', ['-u', 'nobody', '--', 'env', '-i', `PATH=${process.env.PATH}`, `HOME=${home}`, `XDG_CONFIG_HOME=${home}`,
    `ACTORLOOP_DATA_DIR=${dataDir}`, process.execPath, ...args], { cwd: home, encoding: 'utf8', timeout: 60_000 });
  const probe = asNobody([PROBE, url, agentId, gatewayTokenPath(dataDir), ws]);
  expect(probe.status, `${probe.stdout}\n${probe.stderr}`).toBe(0);
  const got = JSON.parse(probe.stdout) as { uid: number; tokenFile: string; http: Record<string, unknown>; rpc: Record<string, unknown> };
  expect(got.uid).not.toBe(0);
  expect(got.tokenFile).toBe('EACCES');
  expect(got.http).toEqual({ actors: 401, actor: 401, events: 401, machines: 401, guessedToken: 401, guessedBearer: 401, pageWithGuess: 401 });
  expect(got.rpc).toEqual({ submit: { status: 401 }, steer: { status: 401 }, interrupt: { status: 401 }, list: { status: 401 }, subscribe: { status: 401 } });

  // the CLI as nobody, pointed at the owner's data dir, finds no token it may read: one line, exit 2
  const theirRun = asNobody([join(REPO_ROOT, 'bin', 'actorloop.js'), 'run', 'run as the owner', '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'full-auto', '--cwd', home, '--gateway', url]);
  expect(theirRun.status, `${theirRun.stdout}\n${theirRun.stderr}`).toBe(2);
  expect(lines(theirRun.stderr)).toHaveLength(1);
  expect(theirRun.stderr).toContain(`needs its token (401): no token this user can read at ${gatewayTokenPath(dataDir)}`);
  const theirSteer = asNobody([join(REPO_ROOT, 'bin', 'actorloop.js'), 'send', agentId, 'steered by another user', '--steer', '--gateway', url]);
  expect(theirSteer.status, `${theirSteer.stdout}\n${theirSteer.stderr}`).toBe(2);
  expect(theirSteer.stderr).toContain('needs its token (401)');

  // nothing reached the owner's runtime: no new agent, nothing new in the agent's log
  expect(await ownersAgents(cli)).toEqual(agentsBefore);
  const after = await cli.run(['events', agentId, '--json', '--gateway', url]);
  expect(parseEvents(after.stdout)).toHaveLength(eventsBefore);
  expect(after.stdout).not.toContain('another user');
  const detail = await cli.run(['tree', agentId, '--gateway', url]);
  expect(detail.stdout).toContain('waiting');
}, 120_000);
