// Subagent workspaces through the real CLI (on the built dist/): a worktree child works in a git
// worktree under the data dir and its notice carries its diff; a shared child writes the parent's
// workspace, its write taken under a resource lease on the server.
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { SubagentNoticeSchema } from '../../src/protocol/subagents.js';
import { parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const stack = useCliStack();

const SCRIPT = {
  agents: {
    main: { responses: [
      { tool_calls: [
        { name: 'spawn_agent', arguments: { task: 'write left.txt', name: 'left', workspace: 'worktree', mode: 'foreground' } },
        { name: 'spawn_agent', arguments: { task: 'write x.txt', name: 'sharer', workspace: 'shared', mode: 'foreground' } },
      ] },
      { content: 'both done' },
    ] },
    left: { responses: [{ tool_calls: [{ name: 'write_file', arguments: { path: 'left.txt', content: 'L\n' } }] }, { content: 'wrote left.txt' }] },
    sharer: { responses: [{ tool_calls: [{ name: 'write_file', arguments: { path: 'x.txt', content: 'shared\n' } }] }, { content: 'wrote x.txt' }] },
  },
};

describe('subagent workspaces from the CLI', () => {
  test('a worktree child brings its diff back, a shared child writes the workspace', async ({ expect, onTestFinished }) => {
    const ws = await stack.dir('ws');
    const dataDir = await stack.dir('data');
    await mkdir(join(ws, 'src'));
    await writeFile(join(ws, 'src', 'a.txt'), 'alpha\n');
    const git = (...args: string[]) => execFileSync('git', ['-C', ws, '-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args]);
    git('init', '-q');
    git('add', '.');
    git('commit', '-q', '-m', 'init');
    const file = join(dataDir, 'script.json');
    await writeFile(file, JSON.stringify(SCRIPT));
    const cli = stack.cli(onTestFinished, dataDir);
    const run = await cli.run(['run', 'split it', '--model', `scripted:${file}`, '--cwd', ws, '--approve', 'auto-edit', '--json', '--nats', stack.nats.url, '--data-dir', dataDir]);
    expect({ code: run.code, signal: run.signal }, show(run)).toEqual({ code: 0, signal: null });
    const events: ActorEvent[] = parseEvents(run.stdout);
    const spawned = events.filter((e) => e.type === 'subagent/spawned') as Extract<ActorEvent, { type: 'subagent/spawned' }>[];
    const worktree = spawned.map((e) => e.data.worktree).find((w) => w)!;
    expect(worktree.startsWith(join(dataDir, 'worktrees'))).toBe(true);
    expect(await readFile(join(worktree, 'left.txt'), 'utf8')).toBe('L\n');
    await expect(stat(join(ws, 'left.txt'))).rejects.toThrow();
    expect(await readFile(join(ws, 'x.txt'), 'utf8')).toBe('shared\n');
    const notices = events
      .filter((e) => e.type === 'inbox/received' && e.data.kind === 'subagent_completed')
      .map((e) => SubagentNoticeSchema.parse(JSON.parse((e as Extract<ActorEvent, { type: 'inbox/received' }>).data.content)));
    const left = notices.find((n) => n.name === 'left')!;
    expect(left.artifacts).toHaveLength(1);
    expect(left.artifacts[0]!.what).toMatch(/diff of its worktree/);
    expect(notices.find((n) => n.name === 'sharer')!.artifacts).toEqual([]);
  });
});
