// Approvals through the real CLI: `run` without a TTY stops at the first call that needs a
// person (exit 5, the approval ID on stderr and in the approval/requested event), and `approve`
// / `deny` deliver the answer through the agent's inbox and host the turn to its end.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, test, type ExpectStatic } from 'vitest';
import { onTerminal } from '../helpers/terminal.js';
import { AGENT_ID, DEMO_SCRIPT, cliEnv, lines, parseEvents, show, type CliResult } from '../helpers/cli.js';
import { useCliStack, type TestEnd } from '../helpers/cli-stack.js';

const TASK = 'The test in test/slug.test.js fails. Find the bug in src/slug.js, fix it, and tell me what was wrong.';

/** Lines of the diff the demo's write_file makes of src/slug.js (its fix), as an approval shows them. */
const DIFF_LINES = ['edit src/slug.js (+1 -1)', '--- a/src/slug.js', '+++ b/src/slug.js', '@@ -3,6 +3,6 @@', "-    .replace(' ', '-')", "+    .replace(/\\s+/g, '-')"];

const stack = useCliStack();

let buggySlug: string;

beforeAll(async () => {
  buggySlug = await readFile(new URL('../../examples/demo/workspace/src/slug.js', import.meta.url), 'utf8');
});
const setup = (onTestFinished: TestEnd) => stack.setup(onTestFinished);

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

describe('approvals from the CLI', () => {
  test('run stops at the write with exit 5; approve runs it and finishes the turn', async ({ expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, '--json', ...common]);
    expectExit(expect, run, 5);
    const agentId = lines(run.stderr)[0]!;
    expect(agentId).toMatch(AGENT_ID);
    // the turn it followed is parked for a person, not work it left: no "resume carries it on"
    expect(run.stderr, show(run)).not.toMatch(/nothing runs it now|handed to a live host/);
    const requested = parseEvents(run.stdout).find((e) => e.type === 'approval/requested');
    expect(requested?.type === 'approval/requested' && requested.data.tool).toBe('write_file');
    const approvalId = requested?.type === 'approval/requested' ? requested.data.approvalId : '';
    expect(approvalId).toMatch(/^apr_/);
    expect(run.stderr).toContain(`waiting for approval ${approvalId}`);
    expect(run.stderr).toContain(`actorloop approve ${agentId} ${approvalId}`);
    // what the write would do, as the diff the host made when it asked
    for (const line of DIFF_LINES) expect(run.stderr).toContain(line);
    expect(run.stderr).toContain(`scope: write path:${ws}/src/slug.js`);
    // nothing was written while it waited
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).toBe(buggySlug);

    const approved = await cli.run(['approve', agentId, approvalId, '--json', ...common]);
    expectExit(expect, approved, 0);
    const events = parseEvents(approved.stdout);
    expect(events.map((e) => e.type)).toContain('approval/granted');
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).not.toBe(buggySlug);

    const verify = await cli.run(['verify', agentId, ...common]);
    expectExit(expect, verify, 0);
    // answered once: a second answer is a clear error, not a second run
    const again = await cli.run(['approve', agentId, approvalId, ...common]);
    expectExit(expect, again, 3);
    expect(again.stderr).toMatch(/has no open turn, so approval .* has nothing to answer. its last turn ended completed/);
  });

  test('deny tells the model why; the file stays as it was', async ({ expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, ...common]);
    expectExit(expect, run, 5);
    const agentId = lines(run.stderr).find((l) => AGENT_ID.test(l)) ?? lines(run.stdout)[0]!;
    const approvalId = /waiting for approval (apr_\w+)/.exec(run.stderr)![1]!;
    const denied = await cli.run(['deny', agentId, approvalId, '--reason', 'leave slug.js alone', '--json', ...common]);
    // the script goes on after the denial to its final answer
    expectExit(expect, denied, 0);
    const events = parseEvents(denied.stdout);
    expect(events.find((e) => e.type === 'tool/denied')).toMatchObject({ data: { reason: 'denied by a person: leave slug.js alone' } });
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).toBe(buggySlug);
  });

  test('actorloop approvals lists the pending approval of a parked agent with its diff; --json parses; none pending and unknown agents are said', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, ...common]);
    expectExit(expect, run, 5);
    const agentId = lines(run.stdout)[0]!;
    const approvalId = /waiting for approval (apr_\w+)/.exec(run.stderr)![1]!;

    const listed = await cli.run(['approvals', agentId, ...common]);
    // the printed lines reach this data dir and server when pasted
    const where = `--data-dir ${dataDir} --nats ${stack.nats.url}`;
    expectExit(expect, listed, 0);
    const shown = lines(listed.stdout).map((l) => l.trim());
    expect(shown[0]).toBe(`write_file (version 1) asks for approval ${approvalId}`);
    for (const line of DIFF_LINES) expect(shown, listed.stdout).toContain(line);
    expect(shown).toContain(`scope: write path:${ws}/src/slug.js`);
    expect(shown.some((l) => l.startsWith('plan digest: sha256:'))).toBe(true);
    expect(shown).toContain(`approve: actorloop approve ${agentId} ${approvalId} ${where}`);
    expect(shown).toContain(`deny:    actorloop deny ${agentId} ${approvalId} ${where} [--reason "<why>"]`);

    const json = await cli.run(['approvals', agentId, '--json', ...common]);
    expectExit(expect, json, 0);
    const records = lines(json.stdout).map((l) => JSON.parse(l) as Record<string, any>);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ agentId, approvalId, tool: 'write_file', state: 'pending', preview: { kind: 'diff', summary: 'edit src/slug.js (+1 -1)', truncated: false } });
    expect(records[0]!.preview.text.split('\n')).toEqual(expect.arrayContaining(DIFF_LINES.slice(1)));
    expect(records[0]!.approve).toBe(`actorloop approve ${agentId} ${approvalId} ${where}`);

    expectExit(expect, await cli.run(['approve', agentId, approvalId, ...common]), 0);
    const none = await cli.run(['approvals', agentId, ...common]);
    expectExit(expect, none, 0);
    expect(none.stdout).toBe(`${agentId} has no pending approvals\n`);
    const noneJson = await cli.run(['approvals', agentId, '--json', ...common]);
    expectExit(expect, noneJson, 0);
    expect(noneJson.stdout).toBe('');

    const unknown = await cli.run(['approvals', 'agt_01J00000000000000000000000', ...common]);
    expectExit(expect, unknown, 3);
    expect(unknown.stderr).toMatch(/^actorloop: no agent agt_01J00000000000000000000000 in this data dir/);
  });

  test('a wrong approval ID is a clear error naming the pending one', async ({ expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, ...common]);
    expectExit(expect, run, 5);
    const agentId = lines(run.stdout)[0]!;
    const approvalId = /waiting for approval (apr_\w+)/.exec(run.stderr)![1]!;
    const wrong = await cli.run(['approve', agentId, 'apr_01J00000000000000000000000', ...common]);
    expectExit(expect, wrong, 3);
    expect(wrong.stderr).toContain(`pending approvals: ${approvalId}`);
    expect(wrong.stderr).not.toMatch(/\n\s+at /);
  });

  test('a deny rule in actorloop.toml denies the write without asking', async ({ expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    await writeFile(join(ws, 'actorloop.toml'), '[[policy.rules]]\ntool = "write_file"\npaths = ["src/**"]\ndecision = "deny"\nreason = "sources are read-only here"\n');
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, '--json', ...common]);
    expectExit(expect, run, 0);
    const events = parseEvents(run.stdout);
    expect(events.find((e) => e.type === 'policy/decided' && e.data.decision === 'deny')).toMatchObject({ data: { rule: 'config:1' } });
    expect(events.find((e) => e.type === 'tool/denied')?.data).toMatchObject({ reason: expect.stringContaining('sources are read-only here') });
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).toBe(buggySlug);
  });

  test('a bad policy rule is a one-line config error naming the file and the key', async ({ expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    await writeFile(join(ws, 'actorloop.toml'), '[[policy.rules]]\ntool = "shell"\ndecision = "maybe"\n');
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, ...common]);
    expectExit(expect, run, 2);
    expect(run.stderr).toMatch(/actorloop\.toml: policy\.rules\.0\.decision: decision must be "allow", "ask" or "deny"/);
  });

  test('approve after the approval expired commits the expiry, says so, and goes on denied', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    await mkdir(join(dataDir, 'config-home', 'actorloop'), { recursive: true });
    await writeFile(join(dataDir, 'config-home', 'actorloop', 'config.toml'), 'approval_ttl_seconds = 1\n');
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, ...common]);
    expectExit(expect, run, 5);
    const agentId = lines(run.stdout)[0]!;
    const approvalId = /waiting for approval (apr_\w+)/.exec(run.stderr)![1]!;
    await new Promise((r) => setTimeout(r, 1_500));
    const late = await cli.run(['approve', agentId, approvalId, ...common]);
    // the turn goes on without the call, as a host would have carried it on at the expiry
    expectExit(expect, late, 0);
    expect(late.stderr).toContain(`approval ${approvalId} expired at `);
    expect(late.stderr).toContain('the call is denied');
    // how the last incarnation ended is a note on stderr, never ahead of the answer on stdout
    expect(late.stdout).not.toMatch(/recovered:/);
    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(log.find((e) => e.type === 'approval/denied')).toMatchObject({ data: { approvalId, by: 'expiry' } });
    expect(log.some((e) => e.type === 'approval/granted')).toBe(false);
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).toBe(buggySlug);
    const verify = await cli.run(['verify', agentId, ...common]);
    expectExit(expect, verify, 0);
  });

  test('The approval prompt for write_file over an existing file shows the diff', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, common } = await setup(onTestFinished);
    // `script` gives the CLI a pseudo-terminal, as a person's shell would
    const cmd = ['node', 'bin/actorloop.js', 'run', JSON.stringify(TASK), '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, ...common];
    const term = onTerminal(cmd, cliEnv(dataDir), onTestFinished);
    let atPrompt = '';
    term.once('allow? [y]es once', (then) => {
      // what the person saw when asked: the diff is above the question, not after the answer
      atPrompt = then;
      term.type('y\r');
    });
    const code = await term.closed;
    const screen = term.screen;
    expect(atPrompt, screen).toContain('write_file (version 1) asks for approval apr_');
    const shown = atPrompt.replace(/\r/g, '').split('\n').map((l) => l.trim());
    for (const line of DIFF_LINES) expect(shown, atPrompt).toContain(line);
    expect(shown).toContain(`scope: write path:${ws}/src/slug.js`);
    expect(atPrompt).toMatch(/expires: \d{4}-\d\d-\d\dT[\d:.]+Z \(in 2[34] h/);
    expect(screen).toMatch(/completed · turn [\d,]+ tokens/);
    expect(code).toBe(0);
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).not.toBe(buggySlug);
  });
});
