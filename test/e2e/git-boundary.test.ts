// The host runs git on workspaces (a `worktree` child's checkout and its diff), so an agent that
// writes what git runs would run code as the host's user, next to the bus logins in the data
// dir. Each attack below, through the real CLI (on the built dist/), real git and bubblewrap, is
// tried as an agent would: its payload copies the logins to a marker file, which must never
// appear; what the agent tried is refused with a reason it can read.
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { SubagentNoticeSchema } from '../../src/protocol/subagents.js';
import { cliEnv, parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const stack = useCliStack();

const exists = (p: string): Promise<boolean> => stat(p).then(() => true, () => false);

interface Setup {
  ws: string;
  dataDir: string;
  marker: string;
  /** A shell command that copies the bus logins to the marker: what the host must never run. */
  payload: string;
}

/** A committed git workspace, a data dir and a marker path outside both. */
async function setup(): Promise<Setup> {
  const ws = await stack.dir('git-ws');
  const dataDir = await stack.dir('git-data');
  const outside = await stack.dir('git-marker');
  await mkdir(join(ws, 'src'));
  await writeFile(join(ws, 'src', 'a.txt'), 'alpha\n');
  const git = (...args: string[]) => execFileSync('git', ['-C', ws, '-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args]);
  git('init', '-q');
  git('add', '.');
  git('commit', '-q', '-m', 'init');
  const marker = join(outside, 'stolen');
  return { ws, dataDir, marker, payload: `cat ${join(dataDir, 'nats', 'auth.json')} > ${marker}` };
}

async function run(s: Setup, script: unknown, approve: string, onTestFinished: (fn: () => Promise<void>) => void) {
  const file = join(s.dataDir, 'script.json');
  await writeFile(file, JSON.stringify(script));
  const cli = stack.pool.forTest({ onTestFinished }, cliEnv(s.dataDir));
  const r = await cli.run(['run', 'attack', '--model', `scripted:${file}`, '--cwd', s.ws, '--approve', approve, '--json', '--nats', stack.nats.url, '--data-dir', s.dataDir], { timeoutMs: 80_000 });
  return { cli, r, events: parseEvents(r.stdout) as ActorEvent[] };
}

const results = (events: ActorEvent[]) => events.filter((e) => e.type === 'tool/result') as Extract<ActorEvent, { type: 'tool/result' }>[];
const decisions = (events: ActorEvent[]) => events.filter((e) => e.type === 'policy/decided') as Extract<ActorEvent, { type: 'policy/decided' }>[];
const spawnChild = { name: 'spawn_agent', arguments: { task: 'look', name: 'w', workspace: 'worktree', mode: 'foreground' } };

describe('git on agent-writable repositories runs nothing an agent wrote', () => {
  test('write_file of a smudge filter into .git/config and .git/info/attributes is denied, and the worktree step runs no filter', async ({ expect, onTestFinished }) => {
    const s = await setup();
    // quoted: an unquoted ; starts a comment in a config file
    const config = `[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n[filter "x"]\n\tsmudge = \"sh -c '${s.payload}; cat'\"\n`;
    const { r, events } = await run(s, {
      agents: {
        main: { responses: [
          { tool_calls: [
            { name: 'write_file', arguments: { path: '.git/config', content: config } },
            { name: 'write_file', arguments: { path: '.git/info/attributes', content: '* filter=x\n' } },
          ] },
          { tool_calls: [spawnChild] },
          { content: 'done' },
        ] },
        w: { responses: [{ content: 'nothing to do' }] },
      },
    }, 'auto-edit', onTestFinished);
    expect(r.code, show(r)).toBe(0);
    const denied = decisions(events).filter((d) => d.data.decision === 'deny');
    expect(denied.map((d) => d.data.rule), show(r)).toEqual(['protected:.git', 'protected:.git']);
    expect(denied[0]!.data.reason).toMatch(/\.git\/config is inside \.git\/, which the runtime protects.*paths = \[".git\/\*\*"\]/);
    expect(events.some((e) => e.type === 'subagent/spawned'), show(r)).toBe(true);
    expect(await exists(s.marker)).toBe(false);
  }, 90_000);

  test('a repository whose config already names a filter gets no worktree: the spawn is refused with why, and nothing runs', async ({ expect, onTestFinished }) => {
    const s = await setup();
    // as if a policy rule had let the agent write them
    execFileSync('git', ['-C', s.ws, 'config', 'filter.x.smudge', `sh -c '${s.payload}; cat'`]);
    await writeFile(join(s.ws, '.git', 'info', 'attributes'), '* filter=x\n');
    const { r, events } = await run(s, {
      agents: { main: { responses: [{ tool_calls: [spawnChild] }, { content: 'done' }] } },
    }, 'auto-edit', onTestFinished);
    expect(r.code, show(r)).toBe(0);
    const spawn = results(events).find((e) => e.data.source === 'tool:spawn_agent');
    expect(spawn?.data, show(r)).toMatchObject({ ok: false, output: expect.stringMatching(/make git run programs.*filter\.x\.smudge.*use workspace "shared" or "readonly"/) });
    expect(events.some((e) => e.type === 'subagent/spawn_requested')).toBe(false);
    expect(await exists(join(s.dataDir, 'worktrees'))).toBe(false);
    expect(await exists(s.marker)).toBe(false);
  }, 90_000);

  test('a post-checkout hook written by a sandboxed shell is refused, and the worktree step runs no hook', async ({ expect, onTestFinished }) => {
    const s = await setup();
    const hook = `printf '#!/bin/sh\\n${s.payload}\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout`;
    const { r, events } = await run(s, {
      agents: {
        main: { responses: [{ tool_calls: [{ name: 'shell', arguments: { command: hook } }] }, { tool_calls: [spawnChild] }, { content: 'done' }] },
        w: { responses: [{ content: 'nothing to do' }] },
      },
    }, 'full-auto', onTestFinished);
    expect(r.code, show(r)).toBe(0);
    const shell = results(events).find((e) => e.data.source === 'tool:shell');
    expect(JSON.stringify(shell?.data.output), show(r)).toMatch(/Read-only file system/);
    expect(await exists(join(s.ws, '.git', 'hooks', 'post-checkout'))).toBe(false);
    expect(events.some((e) => e.type === 'subagent/spawned'), show(r)).toBe(true);
    expect(await exists(s.marker)).toBe(false);
  }, 90_000);

  test('a worktree child that re-inits its own .git (alternates, fsmonitor, a clean filter) is refused, and its diff runs nothing', async ({ expect, onTestFinished }) => {
    const s = await setup();
    const reinit = [
      'rm -f .git', 'git init -q', `echo ${join(s.ws, '.git', 'objects')} > .git/objects/info/alternates`,
      `git config core.fsmonitor "${s.payload}"`, `git config filter.x.clean "sh -c '${s.payload}; cat'"`, "echo '* filter=x' > .gitattributes",
    ].join(' && ');
    const { r, events, cli } = await run(s, {
      agents: {
        main: { responses: [{ tool_calls: [spawnChild] }, { content: 'done' }] },
        w: { responses: [
          { tool_calls: [{ name: 'write_file', arguments: { path: '.git', content: `gitdir: ${join(s.ws, '.git')}\n` } }] },
          { tool_calls: [{ name: 'shell', arguments: { command: `${reinit}; echo work > work.txt` } }] },
          { content: 'done' },
        ] },
      },
    }, 'full-auto', onTestFinished);
    expect(r.code, show(r)).toBe(0);
    const spawned = events.find((e) => e.type === 'subagent/spawned') as Extract<ActorEvent, { type: 'subagent/spawned' }> | undefined;
    expect(spawned, show(r)).toBeDefined();
    const child = parseEvents((await cli.run(['events', spawned!.data.childId, '--json', '--nats', stack.nats.url, '--data-dir', s.dataDir])).stdout) as ActorEvent[];
    // the file tool is denied, the shell cannot replace the .git file the runtime made
    expect(decisions(child).find((d) => d.data.decision === 'deny')?.data.rule).toBe('protected:.git');
    const shell = results(child).find((e) => e.data.source === 'tool:shell');
    expect(JSON.stringify(shell?.data.output)).toMatch(/cannot remove '\.git'/);
    // the diff is taken: the child's .git is the one the runtime made
    const notice = events
      .filter((e) => e.type === 'inbox/received' && e.data.kind === 'subagent_completed')
      .map((e) => SubagentNoticeSchema.parse(JSON.parse((e as Extract<ActorEvent, { type: 'inbox/received' }>).data.content)))[0]!;
    expect(notice, show(r)).toMatchObject({ reason: null, artifacts: [{ what: expect.stringMatching(/^diff of its worktree/) }] });
    expect(await readFile(join(spawned!.data.worktree!, 'work.txt'), 'utf8')).toBe('work\n');
    expect(await exists(s.marker)).toBe(false);
  }, 90_000);
});
