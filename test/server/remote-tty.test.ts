// A `--gateway` command on a terminal asks the person what the turn waits for, as a local one
// does: `run --gateway` in this process, its stdin and stderr terminals (streams that say they
// are TTYs), a real gateway and a real `actorloop host` behind it. A question is asked with its
// options numbered and answered with `ask.answer`; an approval is asked and answered with
// `approval.respond`; the turn then completes.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { remoteRunCommand } from '../../src/cli/commands/remote.js';
import { EXIT } from '../../src/cli/exit-codes.js';
import { loadConfig } from '../../src/config/config.js';
import { openGatewayFixture, until, type GatewayFixture } from './gateway-fixture.js';

let f: GatewayFixture;
let url = '';

beforeAll(async () => {
  f = await openGatewayFixture();
  await f.host('tty-host');
  const g = await f.gateway();
  url = g.url;
}, 60_000);

afterAll(async () => {
  await f?.stop();
});

/** A terminal whose input the test types and whose output it reads. */
function terminal() {
  const stdin = Object.assign(new PassThrough(), { isTTY: true });
  const stderr = Object.assign(new PassThrough(), { isTTY: true });
  const stdout = Object.assign(new PassThrough(), { isTTY: false });
  let err = '';
  let out = '';
  stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
  stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  return { out: { stdin, stderr, stdout }, err: () => err, stdoutText: () => out, type: (line: string) => stdin.write(`${line}\n`) };
}

test('run --gateway on a terminal asks the question and the approval the turn waits for, answers them through the gateway, and the turn completes', async () => {
  const ws = await mkdtemp(join(tmpdir(), 'actorloop-tty-'));
  f.dirs.push(ws);
  const script = join(ws, 'ask.json');
  const colour = { name: 'ask_user', arguments: { question: 'Which colour?', options: [{ id: 'red', label: 'Red' }, { id: 'blue', label: 'Blue' }] } };
  const write = { name: 'write_file', arguments: { path: 'colour.txt', content: 'blue\n' } };
  await writeFile(script, JSON.stringify({ responses: [{ tool_calls: [colour] }, { tool_calls: [write] }, { content: 'blue it is' }] }));
  const t = terminal();
  const config = loadConfig({ dataDir: join(ws, 'unused-data-dir') });
  const done = remoteRunCommand('ask me, then write it', { model: `scripted:${script}`, cwd: ws, approve: 'ask', gateway: url }, config, t.out);
  await until('the question on the terminal', () => t.err().includes('pick 1-2'), 30_000);
  expect(t.err()).toContain('Which colour?');
  expect(t.err()).toContain('2) Blue');
  t.type('2');
  await until('the approval on the terminal', () => t.err().includes('allow? [y]es once'), 30_000);
  expect(t.err()).toContain('write_file');
  t.type('y');
  const code = await done;
  expect(code, `${t.stdoutText()}\n${t.err()}`).toBe(EXIT.completed);
  expect(t.stdoutText()).toContain('blue it is');
  await rm(join(ws, 'unused-data-dir'), { recursive: true, force: true });
}, 90_000);
