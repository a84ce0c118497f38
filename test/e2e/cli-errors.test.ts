// The CLI's contract with scripts and people: exit codes, and one line on stderr (no stack
// trace) saying what went wrong and what to do. Real processes, a real nats-server.
import { writeFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, test, type TestContext } from 'vitest';
import { AGENT_ID, CliProcesses, DEMO_SCRIPT, cliEnv, lines, parseEvents, show, type CliResult } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const stack = useCliStack();

let dataDir: string;
let scratch: string;
let ws: string;

/** The test's own process tracker: its children are killed when it finishes, pass or fail. */
function cliFor(ctx: TestContext, env = cliEnv(dataDir)): CliProcesses {
  return stack.pool.forTest(ctx, env);
}

beforeAll(async () => {
  dataDir = await stack.dir('data');
  scratch = await stack.dir('scripts');
  ws = await stack.workspace();
});

/** Writes a script file under the scratch dir and returns its path. */
async function script(name: string, text: string): Promise<string> {
  const path = join(scratch, name);
  await writeFile(path, text);
  return path;
}

/** The process exited with `code` after writing exactly one `actorloop: ...` line to stderr, and no stack. */
function expectOneLineError(r: CliResult, code: number): string {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
  expect(r.stderr, show(r)).not.toMatch(/^ {4}at /m);
  const errLines = lines(r.stderr);
  expect(errLines, show(r)).toHaveLength(1);
  expect(errLines[0]).toMatch(/^actorloop: /);
  return errLines[0]!;
}

describe('a mistake in the input: one line on stderr, exit 2, nothing started', () => {
  // Every command here points at the test server, so even a regression that got as far as
  // opening the bus would start no embedded nats-server.
  const run = (ctx: TestContext, ...args: string[]) => cliFor(ctx).run(['run', ...args, '--nats', stack.nats.url, '--data-dir', dataDir]);
  const demo = () => ['--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws];

  /** Exit 2 with one line, and nothing on stdout: no agent was created. */
  function expectUsage(r: CliResult): string {
    const line = expectOneLineError(r, 2);
    expect(r.stdout, show(r)).toBe('');
    return line;
  }

  test.concurrent('an empty task', async (ctx) => {
    expect(expectUsage(await run(ctx, '', ...demo()))).toMatch(/task is empty/);
  });

  test.concurrent('an unknown flag', async (ctx) => {
    expect(expectUsage(await run(ctx, 'x', '--bogus', ...demo()))).toContain('--bogus');
  });

  test.concurrent('a missing script file names the file', async (ctx) => {
    expect(expectUsage(await run(ctx, 'x', '--model', 'scripted:/nope.json', '--cwd', ws))).toContain('/nope.json');
  });

  test.concurrent('a script that is not JSON names the file and the position', async (ctx) => {
    const path = await script('broken.json', '{"responses": [\n');
    const line = expectUsage(await run(ctx, 'x', '--model', `scripted:${path}`, '--cwd', ws));
    expect(line).toContain(path);
    expect(line).toMatch(/not valid JSON.*line 2/);
  });

  test.concurrent('a script failing the schema names the JSON path', async (ctx) => {
    const path = await script('schema.json', JSON.stringify({ responses: [{ content: 'x', tool_calls: [{ name: 'read_file', arguments: 5 }] }] }));
    const line = expectUsage(await run(ctx, 'x', '--model', `scripted:${path}`, '--cwd', ws));
    expect(line).toContain(path);
    expect(line).toContain('responses[0].tool_calls[0].arguments');
  });

  test.concurrent('no model: names --model scripted: and OPENAI_API_KEY', async (ctx) => {
    const line = expectUsage(await run(ctx, 'x', '--cwd', ws));
    expect(line).toContain('--model scripted:');
    expect(line).toContain('OPENAI_API_KEY');
  });

  test.concurrent('an unknown model provider', async (ctx) => {
    expect(expectUsage(await run(ctx, 'x', '--model', 'foo:bar', '--cwd', ws))).toMatch(/unknown model provider "foo"/);
  });

  test.concurrent('--max-steps abc', async (ctx) => {
    const line = expectUsage(await run(ctx, 'x', ...demo(), '--max-steps', 'abc'));
    expect(line).toContain('--max-steps');
    expect(line).toContain('"abc"');
  });

  test.concurrent('--max-steps 0 (a turn needs at least one step)', async (ctx) => {
    expect(expectUsage(await run(ctx, 'x', ...demo(), '--max-steps', '0'))).toContain('--max-steps');
  });

  test.concurrent('--cwd that does not exist', async (ctx) => {
    expect(expectUsage(await run(ctx, 'x', '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', '/does/not/exist'))).toContain('/does/not/exist');
  });

  test.concurrent('--tools naming an unknown tool', async (ctx) => {
    const line = expectUsage(await run(ctx, 'x', ...demo(), '--tools', 'read_file,nope'));
    expect(line).toMatch(/unknown tool nope\b/);
    expect(line).toContain('apply_patch, artifact_read, ask_user, cancel_job, get_goal, interrupt_agent, job_status, list_dir, load_skill, memory, memory_search, read_file, report, search, send_message, shell, spawn_agent, start_job, start_workflow, stop, update_goal, update_plan, wait_agents, wait_jobs, write_file');
  });

  test.concurrent('--fault bogus', async (ctx) => {
    expect(expectUsage(await run(ctx, 'x', ...demo(), '--fault', 'bogus'))).toMatch(/invalid fault spec "bogus"/);
  });
});

describe('an ID that is not one: one line naming what is wrong, exit 2, before any bus call', () => {
  // a server nobody listens on: a command that reached for the bus before checking its IDs would
  // say it cannot reach it, not what is wrong with the ID
  const nowhere = (): string[] => ['--nats', 'nats://127.0.0.1:9', '--data-dir', dataDir];
  const agent = 'agt_01ABCDEFGHJKMNPQRSTVWXYZ01';
  const long = `agt_${'A'.repeat(5000)}`;
  const cases: Array<[string, string[], RegExp]> = [
    ['events', ['events', 'agt_*'], /"agt_\*" is not an agent ID: it holds "\*"/],
    ['events --gateway', ['events', 'agt_>', '--gateway', 'http://127.0.0.1:9'], /"agt_>" is not an agent ID/],
    ['resume', ['resume', '../../etc'], /"\.\.\/\.\.\/etc" is not an agent ID: it does not start with agt_/],
    ['send', ['send', 'constructor', 'hi'], /"constructor" is not an agent ID/],
    ['interrupt', ['interrupt', '%00'], /"%00" is not an agent ID/],
    ['goal', ['goal', 'agt_*'], /is not an agent ID/],
    ['plan', ['plan', 'agt_*'], /is not an agent ID/],
    ['verify', ['verify', long], /"agt_A{36}"… \(5,004 characters\) is not an agent ID: it has 5,000 characters after agt_, not 26/],
    ['approvals', ['approvals', 'agt_*'], /is not an agent ID/],
    ['tree', ['tree', 'agt_*'], /is not an agent ID/],
    ['run --continue', ['run', 'go on', '--continue', 'agt_*'], /is not an agent ID/],
    ['dlq list --actor', ['dlq', 'list', '--actor', 'agt_*'], /is not an agent ID/],
    ['approve, the approval', ['approve', agent, '__proto__'], /"__proto__" is not an approval ID: it does not start with apr_/],
    ['deny, the approval', ['deny', agent, 'apr_*'], /"apr_\*" is not an approval ID/],
    ['approve, the agent', ['approve', 'agt_*', 'apr_01ABCDEFGHJKMNPQRSTVWXYZ01'], /is not an agent ID/],
    ['answer, the question', ['answer', agent, 'toString', 'red'], /"toString" is not a question ID: it does not start with q_/],
    ['answer --gateway, the question', ['answer', agent, 'q_NOPE', 'red', '--gateway', 'http://127.0.0.1:9'], /"q_NOPE" is not a question ID/],
  ];

  test.concurrent.for(cases)('%s', async ([, args, why], ctx) => {
    const r = await cliFor(ctx).run([...args, ...nowhere()]);
    const line = expectOneLineError(r, 2);
    expect(line).toMatch(why);
    expect(line).toMatch(/\(an? (agent|approval|question) ID is (agt|apr|q)_<ULID>: 26 characters of 0-9 and A-Z but I, L, O and U\)$/);
    expect(line.length).toBeLessThan(400);
    expect(r.stdout).toBe('');
  });
});

describe('serve with an address nothing can listen on: one line, exit 2, nothing started', () => {
  test.concurrent.for([
    ['--port 99999', ['--port', '99999'], /port 99999 is not a TCP port/],
    ['--port abc', ['--port', 'abc'], /--port takes a whole number, got "abc"/],
    ['--host with a space', ['--host', 'bad host'], /"bad host" is not an address to listen on/],
  ] as Array<[string, string[], RegExp]>)('%s', async ([, args, why], ctx) => {
    const r = await cliFor(ctx).run(['serve', ...args, '--nats', stack.nats.url, '--data-dir', dataDir]);
    expect(expectOneLineError(r, 2)).toMatch(why);
    expect(r.stdout).toBe('');
  });
});

describe('--in-process with --gateway: refused as run refuses it, one line, exit 2', () => {
  const agent = 'agt_01ABCDEFGHJKMNPQRSTVWXYZ01';
  test.concurrent.for([
    ['send', ['send', agent, 'hi']],
    ['approve', ['approve', agent, 'apr_01ABCDEFGHJKMNPQRSTVWXYZ01']],
    ['deny', ['deny', agent, 'apr_01ABCDEFGHJKMNPQRSTVWXYZ01']],
    ['answer', ['answer', agent, 'q_01ABCDEFGHJKMNPQRSTVWXYZ01', 'red']],
    ['interrupt', ['interrupt', agent]],
    ['run', ['run', 'a task', '--model', `scripted:${DEMO_SCRIPT}`]],
  ] as Array<[string, string[]]>)('%s', async ([command, args], ctx) => {
    // the gateway is one nobody listens on: the refusal comes before any connection
    const r = await cliFor(ctx).run([...args!, '--in-process', '--gateway', 'http://127.0.0.1:9']);
    const line = expectOneLineError(r, 2);
    expect(line).toContain('--in-process');
    expect(line, command).not.toContain('cannot reach');
  });
});

describe('what the user named does not exist: exit 3', () => {
  const unknownAgent = 'agt_01ABCDEFGHJKMNPQRSTVWXYZ01';

  test.concurrent('resume of an unknown agent', async (ctx) => {
    const line = expectOneLineError(await cliFor(ctx).run(['resume', unknownAgent, '--nats', stack.nats.url, '--data-dir', dataDir]), 3);
    expect(line).toContain(unknownAgent);
  });

  test.concurrent('events of an unknown agent', async (ctx) => {
    const line = expectOneLineError(await cliFor(ctx).run(['events', unknownAgent, '--json', '--nats', stack.nats.url, '--data-dir', dataDir]), 3);
    expect(line).toContain(unknownAgent);
  });
});

test('nats-server missing and no NATS_URL: exit 2, saying how to install it or set NATS_URL', async (ctx) => {
  const fresh = await stack.dir('data-nonats');
  try {
    const env = cliEnv(fresh, { ACTORLOOP_NATS_SERVER: '/nonexistent/nats-server' });
    const r = await cliFor(ctx, env).run(['run', 'x', '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws]);
    const line = expectOneLineError(r, 2);
    expect(line).toContain('/nonexistent/nats-server');
    expect(line).toContain('apt-get install -y nats-server');
    expect(line).toContain('NATS_URL');
    expect(r.stdout).toBe('');
  } finally {
    await rm(fresh, { recursive: true, force: true });
  }
});

describe('budgets through the CLI: exit 4, the last event turn/end stopped with the reason', () => {
  async function runStopped(ctx: TestContext, args: string[], reason: string): Promise<CliResult> {
    const r = await cliFor(ctx).run(['run', 'fix the failing test', '--json', '--cwd', ws, '--nats', stack.nats.url, '--data-dir', dataDir, ...args]);
    expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code: 4, signal: null });
    expect(lines(r.stderr)[0], show(r)).toMatch(AGENT_ID);
    const end = parseEvents(r.stdout).at(-1);
    expect(end?.type, show(r)).toBe('turn/end');
    expect(end?.data).toMatchObject({ outcome: 'stopped', reason });
    return r;
  }

  // Budgets stop the demo before its write_file step (the 4th), so the shared workspace stays as it was.
  test('--max-steps 2 stops with step_budget', async (ctx) => {
    await runStopped(ctx, ['--model', `scripted:${DEMO_SCRIPT}`, '--max-steps', '2'], 'step_budget');
  });

  test('--max-tool-calls 1 stops with tool_budget', async (ctx) => {
    await runStopped(ctx, ['--model', `scripted:${DEMO_SCRIPT}`, '--max-tool-calls', '1'], 'tool_budget');
  });

  test('--deadline 1 interrupts a 5 s model response and stops with deadline', async (ctx) => {
    const slow = await script('slow.json', JSON.stringify({ responses: [{ content: 'too late', delay_ms: 5000 }] }));
    const r = await runStopped(ctx, ['--model', `scripted:${slow}`, '--deadline', '1'], 'deadline');
    // A behaviour check with a wide margin, not a benchmark: waiting out the response would take
    // over 5 s; the deadline must cut it short.
    expect(r.elapsedMs).toBeLessThan(4500);
  });
});
