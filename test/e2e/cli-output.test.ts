// What a person reads of a run: on a terminal (a pseudo-terminal from `script`) the model's text
// streamed as it comes, each tool call and its result in brief, the approval inline and a status
// line whose clock stops while the person decides; without a terminal one line per event naming
// its tools; `--quiet` the answer alone; `events` each event's key fields and incarnations 1, 2.
import { readFile } from 'node:fs/promises';
import { beforeAll, describe, test } from 'vitest';
import { onTerminal } from '../helpers/terminal.js';
import { DEMO_SCRIPT, cliEnv, lines, show } from '../helpers/cli.js';
import { useCliStack, type TestEnd } from '../helpers/cli-stack.js';

const TASK = 'The test in test/slug.test.js fails. Find the bug in src/slug.js, fix it, and tell me what was wrong.';

const stack = useCliStack();

let answer: string;

beforeAll(async () => {
  const script = JSON.parse(await readFile(DEMO_SCRIPT, 'utf8')) as { responses: Array<{ content?: string }> };
  answer = script.responses.at(-1)!.content!;
});
const setup = (onTestFinished: TestEnd) => stack.setup(onTestFinished);

/** What a terminal shows of `raw`: each line as last drawn (a status line cleared by `\r\x1b[2K` is gone). */
function rows(raw: string): string[] {
  const out: string[] = [''];
  for (const part of raw.replace(/\r\n/g, '\n').split(/(\r\x1b\[2K|\n)/)) {
    if (part === '\n') out.push('');
    else if (part === '\r\x1b[2K') out[out.length - 1] = '';
    else out[out.length - 1] += part;
  }
  return out.filter((r) => r !== '');
}

describe('on a terminal', () => {
  test('the demo shows its text streamed, each tool call with its result, the approval inline; the clock stops at the prompt', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, common } = await setup(onTestFinished);
    const cmd = ['node', 'bin/actorloop.js', 'run', JSON.stringify(TASK), '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, ...common];
    const term = onTerminal(cmd, cliEnv(dataDir), onTestFinished);
    const WAIT_MS = 4_000;
    // a person takes their time: it is not the run's
    term.once('allow? [y]es once', () => setTimeout(() => term.type('y\r'), WAIT_MS));
    const started = Date.now();
    const code = await term.closed;
    const screen = term.screen;
    expect(code, screen).toBe(0);
    expect(Date.now() - started).toBeGreaterThan(WAIT_MS);
    const shown = rows(screen);
    // the model's first words come from its live deltas: before the commit that counts its tokens
    const said = screen.indexOf('Let me look at the workspace first.');
    expect(said, screen).toBeGreaterThan(0);
    expect(said).toBeLessThan(screen.indexOf('433 tokens'));
    expect(shown).toContain('▸ list_dir .');
    expect(shown).toContain('▸ read_file test/slug.test.js');
    expect(shown).toContain('▸ search replace\\( in src');
    expect(shown).toContain('▸ write_file src/slug.js (214 bytes)');
    expect(shown).toContain('  └ ok · 33 bytes · 4 lines');
    expect(shown).toContain('  └ read_file test/slug.test.js: ok · 358 bytes · 11 lines');
    expect(shown).toContain('    wrote 214 bytes to src/slug.js');
    expect(shown.some((r) => /^ {2}\? needs approval apr_\w+/.test(r))).toBe(true);
    expect(shown.some((r) => /^ {2}approval apr_\w+ granted by /.test(r))).toBe(true);
    // the answer streamed once, and not printed again at the turn's end
    expect(screen.split(answer.slice(0, 40)).length).toBe(2);
    expect(screen).toMatch(/· model · /);
    // every elapsed time the status line showed leaves out the time at the prompt
    const elapsed = [...screen.matchAll(/tokens(?: · (?:cost unknown|\$[\d.]+))? · (\d+\.\d)s/g)].map((m) => Number(m[1]));
    expect(elapsed.length).toBeGreaterThan(5);
    expect(Math.max(...elapsed), screen).toBeLessThan(WAIT_MS / 1000);
    expect(lines(screen.replace(/\r/g, '')).at(-1)).toMatch(/^completed · turn [\d,]+ tokens · cost unknown$/);
  });
});

describe('without a terminal', () => {
  test('one line per event that matters, naming the tools; --quiet prints only the answer', async ({ expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const r = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws, ...common]);
    expect(r.code, show(r)).toBe(0);
    const out = lines(r.stdout);
    expect(out).toContain('step 1 · model: Let me look at the workspace first.');
    expect(out).toContain('step 1 · ▸ list_dir . → ok · 33 bytes · 4 lines');
    expect(out).toContain('step 2 · ▸ read_file src/slug.js → ok · 210 bytes · 8 lines');
    expect(out).toContain('step 4 · ▸ write_file src/slug.js (214 bytes) → ok · 30 bytes');
    expect(out).toContain('step 2: tool_calls · 2 tool calls (read_file) · 498+38 tok');
    expect(out.filter((l) => l.includes(' ▸ ')).map((l) => l.split(' ')[4])).toEqual(['list_dir', 'read_file', 'read_file', 'search', 'write_file', 'read_file']);
    expect(r.stdout).not.toContain('\x1b');
    expect(r.stdout.split(answer).length).toBe(2);

    const ws2 = await stack.workspace();
    const quiet = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws2, '--quiet', ...common]);
    expect(quiet.code, show(quiet)).toBe(0);
    expect(quiet.stdout).toBe(`${answer}\n`);
    // the agent ID is not the answer: stderr
    expect(lines(quiet.stderr)[0]).toMatch(/^agt_/);

    // waiting for a person under --quiet: stdout empty, what to do on stderr, exit 5 as ever
    const ws3 = await stack.workspace();
    const parked = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws3, '--quiet', ...common]);
    expect(parked.code, show(parked)).toBe(5);
    expect(parked.stdout).toBe('');
    expect(parked.stderr).toContain('approve: actorloop approve ');
    const both = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws3, '--quiet', '--json', ...common]);
    expect(both.code).toBe(2);
  });
});

describe('events', () => {
  test('each event with its key fields; after a kill and a resume, incarnations 1 and 2, also from --after', async ({ expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const dying = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws, '--fault', 'after:tool/start', ...common]);
    expect(dying.signal, show(dying)).toBe('SIGKILL');
    const agentId = lines(dying.stdout)[0]!;
    const resumed = await cli.run(['resume', agentId, ...common]);
    expect(resumed.code, show(resumed)).toBe(0);
    expect(resumed.stderr).toContain('killed: incarnation 1 died after seq ');
    const all = await cli.run(['events', agentId, ...common]);
    expect(all.code, show(all)).toBe(0);
    const text = all.stdout;
    expect(text).toMatch(/^\s+\d+ {2}\S+ {2}policy\/decided +allow · \S+/m);
    expect(text).toMatch(/^\s+\d+ {2}\S+ {2}request\/prepared +[\d.]+ (?:bytes|KiB) · \d+ messages · sha256:[0-9a-f]{12}(?: · ~?\d+ tokens(?: of \d+)?)?$/m);
    expect(text).toMatch(/^\s+\d+ {2}\S+ {2}attempt\/start +attempt 1 · scripted:\S+ · request sha256:[0-9a-f]{12}$/m);
    expect(text).toMatch(/^\s+\d+ {2}\S+ {2}tool\/result +ok · \d+ bytes · 4 lines · \d+ ms · README\.md$/m);
    expect(text).toMatch(/^\s+\d+ {2}\S+ {2}actor\/killed +incarnation 1 died after seq \d+ · at after:tool\/start · fault record \(kill\)$/m);
    expect(text).toMatch(/^\s+\d+ {2}\S+ {2}actor\/rehydrated +incarnation 2 · snapshot at seq \d+ \+ \d+ events$/m);
    expect(text).not.toMatch(/epoch \d/);
    // from a later seq the numbers are the same
    const killedSeq = Number(/^\s+(\d+) {2}\S+ {2}actor\/killed/m.exec(text)![1]);
    const tail = await cli.run(['events', agentId, '--after', String(killedSeq - 1), ...common]);
    expect(tail.stdout).toBe(text.slice(text.indexOf(lines(tail.stdout)[0]!)));
  });
});
