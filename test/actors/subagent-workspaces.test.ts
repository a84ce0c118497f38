import { execFileSync } from 'node:child_process';
import { mkdir, readFile, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createGitWorktrees } from '../../src/actors/tree/git-worktrees.js';
import { defaultTooling } from '../../src/actors/agent/tooling.js';
import { findBubblewrap } from '../../src/tools/sandbox.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { SubagentNoticeSchema } from '../../src/protocol/subagents.js';
import { tempDir } from '../helpers/nats.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, message, ofType, startTurn, waitForLog } from './harness.js';
import { answer, call, treeModels } from '../helpers/scripted-tree.js';

const world = actorTestWorld();
const SECRET = 'sk-proj-0123456789abcdefghijklmnopqrstuv';


/** The policy decisions of a log by tool name. */
function decisions(log: ActorEvent[]): { tool: string | undefined; decision: string; rule: string }[] {
  const byCall = new Map(ofType(log, 'tool/call').map((c) => [c.call, c.data.name]));
  return ofType(log, 'policy/decided').map((d) => ({ tool: byCall.get(d.call), decision: d.data.decision, rule: d.data.rule }));
}

async function childLog(sup: Parameters<typeof readLog>[0], rootId: string, parentLog: ActorEvent[], name: string): Promise<ActorEvent[]> {
  const req = ofType(parentLog, 'subagent/spawn_requested').find((e) => e.data.name === name)!;
  return waitForLog(sup, { rootId, actorId: req.data.childId }, (l) => l.some((e) => e.type === 'subagent/notified'));
}

describe('a readonly subagent', () => {
  it('is denied write_file and shell (rule mode:readonly) and may read', async () => {
    const rt = await world.rts.open({
      modelFor: treeModels(() => ({
        main: [call('spawn_agent', { task: 'look around', name: 'looker', workspace: 'readonly', mode: 'foreground' }), answer('looked')],
        looker: [{
          tool_calls: [
            { name: 'read_file', arguments: { path: 'src/a.txt' } },
            { name: 'write_file', arguments: { path: 'src/b.txt', content: 'no\n' } },
            { name: 'shell', arguments: { command: 'touch src/c.txt' } },
          ],
          usage: { input_tokens: 60, output_tokens: 6 },
        }, answer('alpha it says')],
      })),
    });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'investigate', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'subagent/spawn_requested')[0]!.data.permissions).toMatchObject({ readOnly: true, workspaceMode: 'readonly' });
    const child = await childLog(sup, actor.rootId, log, 'looker');
    expect(decisions(child)).toEqual([
      { tool: 'read_file', decision: 'allow', rule: 'default:read' },
      { tool: 'write_file', decision: 'deny', rule: 'mode:readonly' },
      { tool: 'shell', decision: 'deny', rule: 'mode:readonly' },
    ]);
    expect(ofType(child, 'tool/denied')).toHaveLength(2);
    const read = ofType(child, 'tool/result')[0]!;
    expect(read.data).toMatchObject({ ok: true, output: expect.stringContaining('alpha') });
    await expect(stat(join(world.ws, 'src', 'b.txt'))).rejects.toThrow();
    await expect(stat(join(world.ws, 'src', 'c.txt'))).rejects.toThrow();
    const v = verifyLog(child);
    expect(v, formatViolations(v)).toEqual([]);
  });

  it('is what every child of a parent in plan mode is, whatever workspace it asks for', async () => {
    const rt = await world.rts.open({
      modelFor: treeModels(() => ({
        main: [call('spawn_agent', { task: 'write b', name: 'writer', workspace: 'shared', mode: 'foreground' }), answer('planned')],
        writer: [call('write_file', { path: 'src/b.txt', content: 'no\n' }), answer('could not')],
      })),
    });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'plan', turnRequest(world.ws, { approvalMode: 'full-auto', planMode: true }));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'subagent/spawn_requested')[0]!.data.permissions).toMatchObject({ readOnly: true, workspaceMode: 'shared' });
    const child = await childLog(sup, actor.rootId, log, 'writer');
    expect(decisions(child)).toEqual([{ tool: 'write_file', decision: 'deny', rule: 'mode:readonly' }]);
    await expect(stat(join(world.ws, 'src', 'b.txt'))).rejects.toThrow();
  });
});

describe('worktree subagents', () => {
  let repo = '';
  afterEach(async () => {
    if (repo) await rm(repo, { recursive: true, force: true });
  });

  const git = (cwd: string, ...args: string[]): string =>
    execFileSync('git', ['-C', cwd, '-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { encoding: 'utf8' });

  it('each work in a worktree of their own, each notice carries its diff, and the parent applies one with apply_patch', async () => {
    repo = await realpath(await tempDir('repo'));
    await mkdir(join(repo, 'src'));
    await writeFile(join(repo, 'src', 'a.txt'), 'alpha\nbeta\n');
    git(repo, 'init', '-q');
    git(repo, 'add', '.');
    git(repo, 'commit', '-q', '-m', 'init');
    let later: ScriptResponse[] = [];
    const rt = await world.rts.open({
      modelFor: treeModels(() => ({
        main: [
          { tool_calls: [
            { name: 'spawn_agent', arguments: { task: 'write left.txt', name: 'left', workspace: 'worktree', mode: 'foreground' } },
            { name: 'spawn_agent', arguments: { task: 'write right.txt', name: 'right', workspace: 'worktree', mode: 'foreground' } },
          ], usage: { input_tokens: 60, output_tokens: 6 } },
          answer('both done'),
          ...later,
        ],
        left: [call('write_file', { path: 'left.txt', content: 'from the left\n' }), answer('wrote left.txt')],
        right: [
          call('write_file', { path: 'src/a.txt', content: 'alpha\nRIGHT\n' }),
          call('write_file', { path: 'env.txt', content: `OPENAI_API_KEY=${SECRET}\n` }),
          answer('changed a.txt'),
        ],
      })),
    });
    const sup = rt.supervisor({ extra: { worktrees: createGitWorktrees({ dataDir: rt.dataDir }) } });
    const { actor, ended } = await startTurn(sup, 'split the work', turnRequest(repo));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);

    // each child's workspace was its worktree, on its own branch; the parent's files are untouched
    const spawned = ofType(log, 'subagent/spawned');
    expect(spawned).toHaveLength(2);
    for (const s of spawned) {
      expect(s.data.worktree).toBe(join(rt.dataDir, 'worktrees', s.data.childId));
      expect(git(s.data.worktree!, 'rev-parse', '--abbrev-ref', 'HEAD').trim()).toBe(`actorloop/${s.data.childId}`);
    }
    await expect(stat(join(repo, 'left.txt'))).rejects.toThrow();
    expect(await readFile(join(repo, 'src', 'a.txt'), 'utf8')).toBe('alpha\nbeta\n');

    // each notice carries its own child's diff, stored where artifact_read finds it
    const notices = ofType(log, 'inbox/received').filter((e) => e.data.kind === 'subagent_completed').map((e) => SubagentNoticeSchema.parse(JSON.parse(e.data.content)));
    expect(notices.map((n) => n.name).sort()).toEqual(['left', 'right']);
    const diffs = new Map<string, string>();
    for (const n of notices) {
      expect(n.artifacts).toHaveLength(1);
      const art = n.artifacts[0]!;
      expect(art.text).toBeUndefined();
      expect(actor.projection.artifacts?.[art.id]).toBe(art.digest);
      diffs.set(n.name, Buffer.from((await rt.blobs.get(art.digest))!).toString('utf8'));
    }
    expect(diffs.get('left')).toContain('+++ b/left.txt');
    expect(diffs.get('left')).not.toContain('a.txt');
    expect(diffs.get('right')).toContain('+RIGHT');
    expect(diffs.get('right')).not.toContain('left.txt');
    // a secret the child wrote reaches neither the parent's model nor its blobs
    expect(diffs.get('right')).not.toContain(SECRET);
    expect(diffs.get('right')).toContain('[REDACTED');
    expect(notices.find((n) => n.name === 'right')!.artifacts[0]!.what).toMatch(/1 secret was redacted/);
    // the spawn's result (what the parent's model read) names the artifact
    const results = ofType(log, 'tool/result').filter((r) => r.data.source?.startsWith('subagent:'));
    expect(results.every((r) => /Artifact art_\w+ \(diff of its worktree/.test(r.data.output as string))).toBe(true);

    // a second turn: the parent applies the left child's diff as it came
    later = [call('apply_patch', { patch: diffs.get('left') }), answer('applied')];
    const next = actor.whenTurnEnds();
    await sup.send(message(actor.actorId, 'apply the left diff', { request: turnRequest(repo) }));
    await expect(next).resolves.toMatchObject({ outcome: 'completed' });
    expect(await readFile(join(repo, 'left.txt'), 'utf8')).toBe('from the left\n');
    const after = await readLog(sup, actor.rootId, actor.actorId);
    const applied = ofType(after, 'tool/result').at(-1)!;
    expect(applied.data.ok).toBe(true);
    const v = verifyLog(after);
    expect(v, formatViolations(v)).toEqual([]);
  });

  it('run their shell sandboxed in the worktree, though it lies in the data dir the sandbox masks', async () => {
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp' };
    const bwrapPath = await findBubblewrap(env.PATH);
    expect(bwrapPath, 'bubblewrap must work here (.ci/run installs it)').not.toBeNull();
    repo = await realpath(await tempDir('repo'));
    await writeFile(join(repo, 'a.txt'), 'alpha\n');
    git(repo, 'init', '-q');
    git(repo, 'add', '.');
    git(repo, 'commit', '-q', '-m', 'init');
    const rt = await world.rts.open({
      modelFor: treeModels(() => ({
        main: [call('spawn_agent', { task: 'make a file', name: 'maker', workspace: 'worktree', mode: 'foreground' }), answer('made')],
        maker: [call('shell', { command: 'echo made > made.txt && cat a.txt' }), answer('made it')],
      })),
    });
    const sup = rt.supervisor({
      extra: {
        worktrees: createGitWorktrees({ dataDir: rt.dataDir, env }),
        tooling: defaultTooling({ bwrapPath, env, hiddenPaths: [rt.dataDir] }),
      },
    });
    const { actor, ended } = await startTurn(sup, 'go', turnRequest(repo, { approvalMode: 'full-auto' }));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const child = await childLog(sup, actor.rootId, log, 'maker');
    expect(ofType(child, 'policy/decided')[0]!.data).toMatchObject({ decision: 'allow', rule: 'mode:full-auto' });
    expect(ofType(child, 'tool/result')[0]!.data).toMatchObject({ ok: true, output: expect.stringContaining('alpha') });
    const worktree = ofType(log, 'subagent/spawned')[0]!.data.worktree!;
    expect(await readFile(join(worktree, 'made.txt'), 'utf8')).toBe('made\n');
    await expect(stat(join(repo, 'made.txt'))).rejects.toThrow();
    const notice = ofType(log, 'inbox/received').find((e) => e.data.kind === 'subagent_completed')!;
    const art = SubagentNoticeSchema.parse(JSON.parse(notice.data.content)).artifacts[0]!;
    expect(Buffer.from((await rt.blobs.get(art.digest))!).toString('utf8')).toContain('+++ b/made.txt');
  });

  it('tells the parent why a worktree whose .git the child replaced gives no diff', async () => {
    repo = await realpath(await tempDir('repo'));
    await writeFile(join(repo, 'a.txt'), 'alpha\n');
    git(repo, 'init', '-q');
    git(repo, 'add', '.');
    git(repo, 'commit', '-q', '-m', 'init');
    const rt = await world.rts.open({
      modelFor: treeModels(() => ({
        main: [call('spawn_agent', { task: 'edit', name: 'w', workspace: 'worktree', mode: 'foreground' }), answer('saw it')],
        w: [call('write_file', { path: 'a.txt', content: 'beta\n' }), answer('edited')],
      })),
    });
    const real = createGitWorktrees({ dataDir: rt.dataDir });
    // a child that got past its sandbox: its worktree's .git is now a repository of its own
    const tampered = { ...real, worktreeDiff: async (ws: string) => {
      await rm(join(ws, '.git'), { force: true });
      git(ws, 'init', '-q');
      return real.worktreeDiff(ws);
    } };
    const sup = rt.supervisor({ extra: { worktrees: tampered } });
    const { actor, ended } = await startTurn(sup, 'go', turnRequest(repo, { approvalMode: 'full-auto' }));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const notice = SubagentNoticeSchema.parse(JSON.parse(ofType(log, 'inbox/received').find((e) => e.data.kind === 'subagent_completed')!.data.content));
    expect(notice).toMatchObject({ outcome: 'completed', artifacts: [] });
    expect(notice.reason).toMatch(/^its worktree gave no diff: the worktree .* no longer has the \.git file the runtime made/);
    // the model reads it where it reads the child's answer
    expect(ofType(log, 'tool/result').at(-1)!.data.output).toMatch(/ended its turn: completed \(its worktree gave no diff/);
  });

  it('is refused, before anything is spawned, for a workspace that is not a git repository', async () => {
    const rt = await world.rts.open({
      modelFor: treeModels(() => ({
        main: [call('spawn_agent', { task: 'write', name: 'w', workspace: 'worktree', mode: 'foreground' }), answer('could not')],
      })),
    });
    const sup = rt.supervisor({ extra: { worktrees: createGitWorktrees({ dataDir: rt.dataDir }) } });
    const { actor, ended } = await startTurn(sup, 'try', turnRequest(world.ws));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'subagent/spawn_requested')).toEqual([]);
    const result = ofType(log, 'tool/result')[0]!;
    expect(result.data).toMatchObject({ ok: false, error: { code: 'subagent.worktree' } });
    expect(result.data.output).toMatch(/not in a git repository.*use workspace "shared" or "readonly"/);
  });
});
