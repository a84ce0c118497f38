// What the model is given besides its task (issue: context assembly), at the wire: `actorloop run`
// with openai:<model> against the fake OpenAI-compatible server, through the real `openai` client.
// AGENTS.md from the user's config dir and from the project root down to the working directory,
// a deeper one after the call that read there, the skill index and a skill's body on demand, a
// memory added in one session and given to the next, trust labels, kills after `skill/loaded` and
// `memory/changed` resumed to byte-identical requests, and a window too small to send anything.
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { lines, parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { startFakeOpenAI, type FakeOpenAI, type FakeTurn } from '../helpers/fake-openai.js';

const KEY = 'sk-test-0123456789abcdef';
const stack = useCliStack();

type ChatMessage = { role: string; content?: string | null };
type ChatBody = { tools?: Array<{ function: { name: string } }>; messages: ChatMessage[] };

const SKILL = `---
name: release-notes
description: "Writes release notes: what changed, for users, in past tense."
---
SKILL BODY: write the notes in past tense, one line a change.
`;

/** The same world at the same paths each time, so two runs' request bodies can be compared byte for byte. */
async function world(base: string): Promise<{ ws: string; cwd: string; xdg: string }> {
  const ws = join(base, 'ws');
  const xdg = join(base, 'xdg');
  await rm(ws, { recursive: true, force: true });
  await rm(xdg, { recursive: true, force: true });
  await mkdir(join(ws, '.git'), { recursive: true });
  await mkdir(join(ws, 'pkg', 'deep'), { recursive: true });
  await mkdir(join(ws, '.agents', 'skills', 'release-notes'), { recursive: true });
  await mkdir(join(xdg, 'actorloop'), { recursive: true });
  await writeFile(join(ws, 'AGENTS.md'), 'ROOT RULE: keep every change small.\n');
  await writeFile(join(ws, 'pkg', 'AGENTS.md'), 'PKG RULE: pkg indents with tabs.\n');
  await writeFile(join(ws, 'pkg', 'deep', 'AGENTS.md'), 'DEEP RULE: files here are generated; never edit them.\n');
  await writeFile(join(ws, 'pkg', 'deep', 'gen.js'), '// generated\nexport const x = 1;\n');
  await writeFile(join(ws, '.agents', 'skills', 'release-notes', 'SKILL.md'), SKILL);
  await writeFile(join(ws, '.agents', 'skills', 'release-notes', 'template.md'), '# Notes\n');
  await writeFile(join(xdg, 'actorloop', 'AGENTS.md'), 'USER RULE: answer briefly.\n');
  await writeFile(join(ws, 'pkg', 'CHANGES.txt'), 'unrelated line\nrelease 1.2 fixed the slug bug\n');
  return { ws, cwd: join(ws, 'pkg'), xdg };
}

const SESSION: FakeTurn[] = [
  { toolCalls: [{ id: 'call_s1', name: 'load_skill', arguments: '{"name":"release-notes"}' }] },
  { toolCalls: [{ id: 'call_r1', name: 'read_file', arguments: '{"path":"deep/gen.js"}' }] },
  { toolCalls: [{ id: 'call_m1', name: 'memory', arguments: '{"action":"add","file":"memory","text":"tests run with node --test"}' }] },
  { content: 'done' },
];

async function fake(turns: FakeTurn[]): Promise<FakeOpenAI> {
  const s = await startFakeOpenAI({ turns });
  stack.onClose(() => s.close());
  return s;
}

function bodies(server: FakeOpenAI): string[] {
  return server.requests.filter((q) => q.path === '/v1/chat/completions').map((q) => q.rawBody);
}

function system(body: string): string {
  return String((JSON.parse(body) as ChatBody).messages[0]!.content);
}

function ofType<T extends ActorEvent['type']>(events: ActorEvent[], type: T): Array<Extract<ActorEvent, { type: T }>> {
  return events.filter((e): e is Extract<ActorEvent, { type: T }> => e.type === type);
}

describe('context: AGENTS.md, skills and memory reach the model, recorded in the log', () => {
  test('docs broad to narrow, the skill index then its body, a deeper doc after its call, tool output as data; memory carries to the next session; context shows it', async ({ onTestFinished }) => {
    const base = await stack.dir('ctx');
    const { ws, cwd, xdg } = await world(base);
    const dataDir = await stack.dir('data');
    const cli = stack.cli(onTestFinished, dataDir, { OPENAI_API_KEY: KEY, XDG_CONFIG_HOME: xdg });
    const common = stack.flags(dataDir);
    const server = await fake(SESSION);
    const r = await cli.run(['run', 'write the release notes', '--model', 'openai:test-model', '--base-url', server.baseURL, '--cwd', cwd, '--approve', 'auto-edit', '--json', ...common]);
    expect(r.code, show(r)).toBe(0);
    const events = parseEvents(r.stdout);
    const sent = bodies(server);
    expect(sent).toHaveLength(4);

    // the first request: the user's doc, then the project root's, then the working directory's; the skill's description, not its body
    const s1 = system(sent[0]!);
    const order = ['USER RULE', 'ROOT RULE', 'PKG RULE', 'release-notes: Writes release notes'].map((t) => s1.indexOf(t));
    expect(order.every((i) => i >= 0), s1).toBe(true);
    expect([...order].sort((x, y) => x - y)).toEqual(order);
    expect(s1).not.toContain('SKILL BODY');
    expect(s1).not.toContain('DEEP RULE');
    const tools1 = (JSON.parse(sent[0]!) as ChatBody).tools!.map((t) => t.function.name);
    expect(tools1).toEqual(expect.arrayContaining(['load_skill', 'memory']));
    expect(tools1).not.toContain('memory_search');

    // after load_skill: its body and its other files are the call's result
    const m2 = (JSON.parse(sent[1]!) as ChatBody).messages;
    expect(String(m2.at(-1)!.content)).toContain('SKILL BODY: write the notes in past tense');
    expect(String(m2.at(-1)!.content)).toContain('template.md');

    // after read_file in pkg/deep: the file's content as data, then the deeper AGENTS.md
    const m3 = (JSON.parse(sent[2]!) as ChatBody).messages;
    expect(String(m3.at(-2)!.content)).toMatch(/^<untrusted_data source="tool:read_file">\n[\s\S]*export const x = 1;[\s\S]*<\/untrusted_data>$/);
    expect(m3.at(-1)!.role).toBe('user');
    expect(String(m3.at(-1)!.content)).toContain('DEEP RULE');
    // and every request starts with the whole previous one (the prompt cache's prefix)
    for (let i = 1; i < sent.length; i++) expect(sent[i]!.slice(0, sent[i - 1]!.lastIndexOf(']'))).toBe(sent[i - 1]!.slice(0, sent[i - 1]!.lastIndexOf(']')));

    // the log names each version the model saw
    const docs = ofType(events, 'doc/loaded');
    expect(docs.map((d) => [d.data.path.slice(base.length), d.data.placement])).toEqual([
      ['/xdg/actorloop/AGENTS.md', 'instructions'], ['/ws/AGENTS.md', 'instructions'], ['/ws/pkg/AGENTS.md', 'instructions'], ['/ws/pkg/deep/AGENTS.md', 'after_call'],
    ]);
    expect(ofType(events, 'skills/indexed')[0]!.data.skills.map((k) => k.name)).toEqual(['release-notes']);
    expect(ofType(events, 'skill/loaded')[0]!.data).toMatchObject({ name: 'release-notes' });
    // no memory file yet: none is loaded
    expect(ofType(events, 'memory/loaded')).toEqual([]);
    const changed = ofType(events, 'memory/changed');
    expect(changed).toHaveLength(1);
    expect(changed[0]!.data.path.startsWith(xdg)).toBe(true);
    expect(await readFile(changed[0]!.data.path, 'utf8')).toContain('- tests run with node --test');
    // never in the repository
    expect((await readdir(ws)).sort()).toEqual(['.agents', '.git', 'AGENTS.md', 'pkg']);
    const prepared = ofType(events, 'request/prepared')[0]!.data;
    // no memory yet
    expect(prepared.contributions!.map((c) => c.source)).toEqual(['instructions', 'project_doc', 'project_doc', 'project_doc', 'skill_index', 'tool_schemas', 'history']);
    expect(prepared.budget).toMatchObject({ window: null, estimated: true });

    // the next session in this workspace is given what the last one added
    const server2 = await fake([{ content: 'I know how tests run.' }]);
    const r2 = await cli.run(['run', 'what do you know?', '--model', 'openai:test-model', '--base-url', server2.baseURL, '--cwd', cwd, '--json', ...common]);
    expect(r2.code, show(r2)).toBe(0);
    expect(system(bodies(server2)[0]!)).toContain('tests run with node --test');
    expect(ofType(parseEvents(r2.stdout), 'memory/loaded').map((m) => m.data.file)).toEqual(['memory']);
    const prepared2 = ofType(parseEvents(r2.stdout), 'request/prepared')[0]!.data;
    expect(prepared2.contributions!.filter((c) => c.source === 'memory').map((c) => c.scope)).toEqual(['MEMORY.md']);

    // `context` names every contribution of a step's request, in order, with the total
    const agentId = lines(r.stderr)[0]!;
    const c = await cli.run(['context', agentId, '--step', '3', ...common]);
    expect(c.code, show(c)).toBe(0);
    expect(c.stdout).toMatch(/SOURCE\s+SCOPE\s+TRUST\s+TOKENS/);
    expect(c.stdout).toMatch(/project_doc\s+pkg\/AGENTS\.md\s+project\s+\d+/);
    expect(c.stdout).toMatch(/project_doc\s+pkg\/deep\/AGENTS\.md\s+project\s+\d+/);
    expect(c.stdout).toMatch(/history\s+\d+ items\s+untrusted/);
    expect(c.stdout).toMatch(/total \d+ tokens \(estimated: four characters a token, the model's tokenizer is not known\); no context window known/);
    const j = JSON.parse((await cli.run(['context', agentId, '--json', ...common])).stdout) as { step: number; contributions: unknown[]; loaded: Array<{ type: string }> };
    expect(j.step).toBe(4);
    expect(j.loaded.map((l) => l.type)).toEqual(expect.arrayContaining(['doc/loaded', 'skills/indexed', 'skill/loaded']));
    const bad = await cli.run(['context', agentId, '--step', '9', ...common]);
    expect(bad.code).toBe(3);
    expect(bad.stderr).toContain('its steps with a request: 1, 2, 3, 4');
  });

  for (const point of ['after:skill/loaded', 'after:memory/changed']) {
    test(`killed ${point}, resumed: every request is byte-identical to an uninterrupted run's`, async ({ onTestFinished }) => {
      const base = await stack.dir('ctx');
      const runOnce = async (fault: string | null): Promise<{ sent: string[]; out: string }> => {
        const { cwd, xdg } = await world(base);
        const dataDir = await stack.dir('data');
        const cli = stack.cli(onTestFinished, dataDir, { OPENAI_API_KEY: KEY, XDG_CONFIG_HOME: xdg });
        const common = stack.flags(dataDir);
        const server = await fake(SESSION);
        const args = ['run', 'write the release notes', '--model', 'openai:test-model', '--base-url', server.baseURL, '--cwd', cwd, '--approve', 'auto-edit', '--json', ...common];
        const r = await cli.run(fault ? [...args, '--fault', fault] : args);
        if (!fault) {
          expect(r.code, show(r)).toBe(0);
          return { sent: bodies(server), out: r.stdout };
        }
        expect(r.signal, show(r)).toBe('SIGKILL');
        const agentId = lines(r.stderr)[0]!;
        const resumed = await cli.run(['resume', agentId, '--json', ...common]);
        expect(resumed.code, show(resumed)).toBe(0);
        const verify = await cli.run(['verify', agentId, ...common]);
        expect(verify.code, show(verify)).toBe(0);
        return { sent: bodies(server), out: `${r.stdout}${resumed.stdout}` };
      };
      const clean = await runOnce(null);
      const killed = await runOnce(point);
      expect(killed.sent).toHaveLength(clean.sent.length);
      for (let i = 0; i < clean.sent.length; i++) expect(killed.sent[i], `request ${i + 1}`).toBe(clean.sent[i]);
      // the memory entry was made once, however the kill fell
      const events = parseEvents(killed.out);
      expect(new Set(ofType(events, 'memory/changed').map((e) => e.data.digest)).size).toBe(1);
    });
  }

  test('retrieval_tokens: excerpts for the task are recorded and sent as data at the end of the system text', async ({ onTestFinished }) => {
    const base = await stack.dir('ctx');
    const { cwd, xdg } = await world(base);
    const dataDir = await stack.dir('data');
    const cli = stack.cli(onTestFinished, dataDir, { OPENAI_API_KEY: KEY, XDG_CONFIG_HOME: xdg });
    const common = stack.flags(dataDir);
    const server = await fake([{ content: 'the slug bug' }]);
    const r = await cli.run(['run', 'what did the last release fix?', '--model', 'openai:test-model', '--base-url', server.baseURL, '--cwd', cwd, '-c', 'retrieval_tokens=400', '--json', ...common]);
    expect(r.code, show(r)).toBe(0);
    const loaded = ofType(parseEvents(r.stdout), 'retrieval/loaded');
    expect(loaded).toHaveLength(1);
    expect(loaded[0]!.data).toMatchObject({ retriever: 'ripgrep', query: 'what did the last release fix?', tokenBudget: 400 });
    const hit = loaded[0]!.data.excerpts.find((x) => x.source === 'pkg/CHANGES.txt');
    expect(hit).toMatchObject({ startLine: 1, endLine: 2 });
    expect(hit!.version).toMatch(/^sha256:[0-9a-f]{64}$/);
    const s1 = system(bodies(server)[0]!);
    expect(s1).toContain('<untrusted_data source="retrieval:pkg/CHANGES.txt:1-2">\nunrelated line\nrelease 1.2 fixed the slug bug');
    expect(s1.indexOf('untrusted_data source="retrieval')).toBeGreaterThan(s1.indexOf('PKG RULE'));
    const c = await cli.run(['context', lines(r.stderr)[0]!, ...common]);
    expect(c.stdout).toMatch(/retrieval\s+\d+ excerpts\s+untrusted\s+\d+/);
  });

  test('memory is a write: in the ask mode its call waits for a person, and nothing is written before it is approved', async ({ onTestFinished }) => {
    const base = await stack.dir('ctx');
    const { cwd, xdg } = await world(base);
    const dataDir = await stack.dir('data');
    const cli = stack.cli(onTestFinished, dataDir, { OPENAI_API_KEY: KEY, XDG_CONFIG_HOME: xdg });
    const common = stack.flags(dataDir);
    const server = await fake([SESSION[2]!, { content: 'noted' }]);
    const r = await cli.run(['run', 'remember how tests run', '--model', 'openai:test-model', '--base-url', server.baseURL, '--cwd', cwd, '--json', ...common]);
    expect(r.code, show(r)).toBe(5);
    const parked = ofType(parseEvents(r.stdout), 'actor/parked')[0]!;
    expect(parked.data.waitingFor).toBe('approval');
    const mem = await cli.run(['memory', '--cwd', cwd, '--json', ...common]);
    expect(mem.code, show(mem)).toBe(0);
    expect(mem.stdout).not.toContain('tests run with node --test');
    const approved = await cli.run(['approve', lines(r.stderr)[0]!, parked.data.ids[0]!, '--json', ...common]);
    expect(approved.code, show(approved)).toBe(0);
    expect((await cli.run(['memory', '--cwd', cwd, '--json', ...common])).stdout).toContain('tests run with node --test');
  });

  test('a context window too small for the fixed parts of the request: the step ends context_cannot_fit before anything is sent, with the numbers; context says why', async ({ onTestFinished }) => {
    const base = await stack.dir('ctx');
    const { cwd, xdg } = await world(base);
    const dataDir = await stack.dir('data');
    const cli = stack.cli(onTestFinished, dataDir, { OPENAI_API_KEY: KEY, XDG_CONFIG_HOME: xdg });
    const common = stack.flags(dataDir);
    const server = await fake([{ content: 'never asked' }]);
    const r = await cli.run(['run', 'write the release notes', '--model', 'openai:test-model', '--base-url', server.baseURL, '--cwd', cwd, '-c', 'context_window=2000', '--json', ...common]);
    expect(r.code, show(r)).not.toBe(0);
    expect(bodies(server)).toHaveLength(0);
    const events = parseEvents(r.stdout);
    expect(ofType(events, 'attempt/start')).toHaveLength(0);
    const refused = ofType(events, 'compaction/rejected')[0]!;
    expect(refused.data).toMatchObject({ reason: 'fixed_too_large', endsStep: true });
    expect(refused.data.message).toMatch(/alone need \d+ tokens and \d+ are kept for the answer, over the 2000-token window/);
    expect(ofType(events, 'turn/end')[0]!.data.reason).toBe(`context_cannot_fit: ${refused.data.message}`);
    const agentId = lines(r.stderr)[0]!;
    const c = await cli.run(['context', agentId, ...common]);
    expect(c.code, show(c)).toBe(0);
    expect(c.stdout).toContain(`step 1 · sent no request: context_cannot_fit: ${refused.data.message}`);
  });
});
