// Settings for one command through the real CLI: `-c key=value` over both config files, `config
// show` naming where each value came from, and `--instructions FILE` reaching the model as the
// system message and `turn/start` recording it.
import { UNTRUSTED_NOTE } from '../../src/context/assembly.js';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { PLAN_MODE_INSTRUCTIONS } from '../../src/actors/agent/plan-mode.js';
import { DEFAULT_INSTRUCTIONS } from '../../src/actors/agent/turn-settings.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { DEMO_SCRIPT, lines, parseEvents, parseRuns, show, type CliResult } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { startFakeOpenAI } from '../helpers/fake-openai.js';

const TASK = 'The test in test/slug.test.js fails. Find the bug in src/slug.js, fix it, and tell me what was wrong.';

const stack = useCliStack();

let buggySlug: string;

beforeAll(async () => {
  buggySlug = await readFile(new URL('../../examples/demo/workspace/src/slug.js', import.meta.url), 'utf8');
});
/** A demo workspace with an actorloop.toml, a user config file, and a CLI whose environment finds them. */
async function setup(onTestFinished: (fn: () => Promise<void>) => void, files: { workspace?: string; user?: string }, env: Record<string, string> = {}) {
  const ws = await stack.workspace();
  const dataDir = await stack.dir('ovr-data');
  const userDir = join(dataDir, 'config-home', 'actorloop');
  await mkdir(userDir, { recursive: true });
  if (files.workspace !== undefined) await writeFile(join(ws, 'actorloop.toml'), files.workspace);
  if (files.user !== undefined) await writeFile(join(userDir, 'config.toml'), files.user);
  const cli = stack.cli(onTestFinished, dataDir, env);
  return { ws, dataDir, cli, common: stack.flags(dataDir) };
}

function expectExit(r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

function ofType<T extends ActorEvent['type']>(events: ActorEvent[], type: T): Array<Extract<ActorEvent, { type: T }>> {
  return events.filter((e): e is Extract<ActorEvent, { type: T }> => e.type === type);
}

/** The policy decision of each write_file call of a run. */
function writeDecisions(events: ActorEvent[]): Array<{ decision: string; rule: string }> {
  const writes = new Set(ofType(events, 'tool/call').filter((e) => e.data.name === 'write_file').map((e) => e.call));
  return ofType(events, 'policy/decided').filter((e) => writes.has(e.call) && e.data.recheck !== true).map((e) => ({ decision: e.data.decision, rule: e.data.rule }));
}

describe('-c key=value', () => {
  test('-c approval_mode="deny-all" overrides what the workspace and user files say: the write they allow is denied', async ({ onTestFinished }) => {
    const files = { workspace: 'approval_mode = "auto-edit"\n', user: 'approval_mode = "auto-edit"\n' };
    // in the files' mode the fix is written without asking
    const plain = await setup(onTestFinished, files);
    const allowed = await plain.cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', plain.ws, '--json', ...plain.common]);
    expectExit(allowed, 0);
    const allowedEvents = parseEvents(allowed.stdout);
    expect(ofType(allowedEvents, 'turn/start')[0]!.data.settings.approvalMode).toBe('auto-edit');
    expect(writeDecisions(allowedEvents)).toEqual([expect.objectContaining({ decision: 'allow' })]);
    expect(await readFile(join(plain.ws, 'src', 'slug.js'), 'utf8')).not.toBe(buggySlug);

    // the same files, and -c as a user types it with TOML quotes kept (`-c 'approval_mode="deny-all"'`)
    const { ws, cli, common } = await setup(onTestFinished, files);
    const denied = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, '--json', '-c', 'approval_mode="deny-all"', ...common]);
    expect(denied.code, show(denied)).not.toBeNull();
    const events = parseEvents(denied.stdout);
    expect(ofType(events, 'turn/start')[0]!.data.settings.approvalMode).toBe('deny-all');
    expect(writeDecisions(events)).toEqual([{ decision: 'deny', rule: 'mode:deny-all' }]);
    expect(ofType(events, 'tool/denied').length).toBeGreaterThan(0);
    expect(ofType(events, 'tool/start').map((e) => e.data.name)).not.toContain('write_file');
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).toBe(buggySlug);
  });

  test('an unknown key gets a "did you mean", exit 2; workspaces is refused with the trust command', async ({ onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished, {});
    const typo = await cli.run(['run', 'x', '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, '-c', 'aproval_mode=deny-all', ...common]);
    expectExit(typo, 2);
    expect(lines(typo.stderr)).toEqual([expect.stringMatching(/^actorloop: -c: unknown key aproval_mode \(did you mean approval_mode\?\)\. the keys are /)]);
    const trust = await cli.run(['config', 'show', '-c', `workspaces.${JSON.stringify(ws)}.trusted=true`]);
    expectExit(trust, 2);
    expect(trust.stderr).toContain('workspaces is not set with -c. trust a workspace with `actorloop trust <dir>`');
  });
});

describe('config show', () => {
  test('names where each value came from: default, workspace file, user file, environment, flag', async ({ onTestFinished }) => {
    const { ws, cli, dataDir } = await setup(onTestFinished, {
      workspace: 'model = "openai:from-workspace"\ninstructions = "Answer in haiku."\n',
      user: 'approval_mode = "auto-edit"\nmax_parallel_calls = 2\n',
    }, { OPENAI_BASE_URL: 'http://127.0.0.1:9/v1' });
    const args = ['config', 'show', '--cwd', ws, '-c', 'max_parallel_calls=3', '-c', 'ask_ttl_seconds=60', '-c', 'max_children_per_tree=5', '-c', 'max_running_jobs=2'];
    const r = await cli.run(args);
    expectExit(r, 0);
    const out = lines(r.stdout);
    const line = (key: string) => out.find((l) => l.startsWith(`${key}: `)) ?? `(no ${key} line)`;
    expect(line('model')).toBe('model: openai:from-workspace (workspace file)');
    expect(line('instructions')).toBe('instructions: "Answer in haiku." (workspace file)');
    expect(line('approval_mode')).toBe('approval_mode: auto-edit (user file)');
    expect(line('base_url')).toBe('base_url: http://127.0.0.1:9/v1 (environment)');
    // cliEnv sets ACTORLOOP_DATA_DIR
    expect(line('data_dir')).toBe(`data_dir: ${dataDir} (environment)`);
    expect(line('max_parallel_calls')).toBe('max_parallel_calls: 3 (flag)');
    expect(line('ask_ttl_seconds')).toBe('ask_ttl_seconds: 60 (flag)');
    expect(line('approval_ttl_seconds')).toBe('approval_ttl_seconds: 86400 (default)');
    expect(line('policy rules')).toBe('policy rules: 0 (default)');
    // the subagent keys too, with where each came from
    expect(line('max_subagent_depth')).toBe('max_subagent_depth: 3 (default)');
    expect(line('max_children_per_parent')).toBe('max_children_per_parent: 8 (default)');
    expect(line('max_children_per_tree')).toBe('max_children_per_tree: 5 (flag)');
    expect(line('on_parent_end')).toBe('on_parent_end: cancel (default)');
    // and the job limits
    expect(line('max_running_jobs')).toBe('max_running_jobs: 2 (flag)');
    expect(line('max_running_jobs_per_tree')).toBe('max_running_jobs_per_tree: 4 (default)');
    expect(line('job_timeout_seconds')).toBe('job_timeout_seconds: 1800 (default)');
    // the other lines stay: trust, the files read
    expect(r.stdout).toMatch(/^workspace: .* \(not trusted: its actorloop\.toml may only tighten\)$/m);
    expect(line('files read')).toContain(join(ws, 'actorloop.toml'));

    const json = await cli.run([...args, '--json', '--data-dir', dataDir]);
    expectExit(json, 0);
    const config = JSON.parse(json.stdout) as { sources: Record<string, string>; instructions: string; maxParallelCalls: number };
    expect(config.sources).toMatchObject({
      model: 'workspace', instructions: 'workspace', approval_mode: 'user', base_url: 'env',
      data_dir: 'flag', max_parallel_calls: 'flag', ask_ttl_seconds: 'flag', approval_ttl_seconds: 'default', nats_url: 'default',
    });
    expect(config).toMatchObject({ instructions: 'Answer in haiku.', maxParallelCalls: 3 });
  });
});

describe('--instructions FILE', () => {
  test('is the system message of the model request and recorded in turn/start; it wins over the config, and plan mode appends to it', async ({ onTestFinished }) => {
    const server = await startFakeOpenAI({ handler: () => ({ content: 'ok' }) });
    stack.onClose(() => server.close());
    const { ws, cli, common, dataDir } = await setup(onTestFinished, { user: 'instructions = "From the user config."\n' }, { OPENAI_API_KEY: 'sk-test-0123456789abcdef' });
    const file = join(dataDir, 'system.md');
    await writeFile(file, 'You are terse.\nAnswer in one line.\n');
    const model = ['--model', 'openai:test-model', '--base-url', server.baseURL, '--cwd', ws, '--json', ...common];
    const systemOf = (i: number) => (server.requests.filter((q) => q.path === '/v1/chat/completions')[i]!.body as { messages: Array<{ role: string; content: string }> }).messages[0];

    const r = await cli.run(['run', 'hi', '--instructions', file, ...model]);
    expectExit(r, 0);
    expect(ofType(parseEvents(r.stdout), 'turn/start')[0]!.data.settings.instructions).toBe('You are terse.\nAnswer in one line.\n');
    // the instructions, then the one sentence on tool output as data (docs/context.md)
    expect(systemOf(0)).toEqual({ role: 'system', content: `You are terse.\nAnswer in one line.\n\n\n${UNTRUSTED_NOTE}` });

    // without the flag, the config's instructions; with -c, those
    const fromConfig = await cli.run(['run', 'hi', ...model]);
    expectExit(fromConfig, 0);
    expect(ofType(parseEvents(fromConfig.stdout), 'turn/start')[0]!.data.settings.instructions).toBe('From the user config.');
    expect(systemOf(1)).toEqual({ role: 'system', content: `From the user config.\n\n${UNTRUSTED_NOTE}` });
    const fromFlag = await cli.run(['run', 'hi', '-c', 'instructions=Be brief.', ...model]);
    expectExit(fromFlag, 0);
    expect(systemOf(2)).toEqual({ role: 'system', content: `Be brief.\n\n${UNTRUSTED_NOTE}` });

    // plan mode keeps its paragraph after the person's instructions
    const plan = await cli.run(['run', 'plan it', '--plan-mode', '--instructions', file, ...model]);
    const planned = ofType(parseEvents(plan.stdout), 'turn/start')[0]!.data.settings;
    expect(planned.instructions).toBe(`You are terse.\nAnswer in one line.\n${PLAN_MODE_INSTRUCTIONS}`);
    expect(systemOf(3)!.content).toBe(`${planned.instructions}\n\n${UNTRUSTED_NOTE}`);
    expect(planned.instructions).not.toContain(DEFAULT_INSTRUCTIONS);
  });

  test('a missing or empty file is a clear error, exit 2, before anything starts', async ({ onTestFinished }) => {
    const { ws, cli, common, dataDir } = await setup(onTestFinished, {});
    const run = (file: string) => cli.run(['run', 'hi', '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, '--instructions', file, ...common]);
    const missing = await run(join(dataDir, 'nope.md'));
    expectExit(missing, 2);
    expect(lines(missing.stderr)).toEqual([`actorloop: instructions file ${join(dataDir, 'nope.md')} is not found. pass --instructions <a text file holding the system prompt>`]);
    await writeFile(join(dataDir, 'empty.md'), '  \n');
    const empty = await run(join(dataDir, 'empty.md'));
    expectExit(empty, 2);
    expect(empty.stderr).toMatch(/instructions file .*empty\.md is empty\. write the system prompt into it/);
    // nothing was started: no agent works in this workspace (the test server is shared by the file's tests)
    const runs = await cli.run(['runs', '--json', ...common]);
    expect(parseRuns(runs.stdout).filter((e) => e.workspace === ws)).toEqual([]);
  });
});
