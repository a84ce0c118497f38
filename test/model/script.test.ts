import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/protocol/errors.js';
import { jsonErrorPosition } from '../../src/model/json-error-position.js';
import { loadScript, ScriptSchema } from '../../src/model/script.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'actorloop-script-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function scriptFile(name: string, content: string | object): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return file;
}

async function loadError(file: string, agent?: string): Promise<ConfigError> {
  const err = await loadScript(file, agent).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  const config = err as ConfigError;
  expect(config.code).toBe('config.script');
  expect(config.message).not.toContain('\n');
  return config;
}

describe('loadScript', () => {
  it('loads the responses form and keeps raw string arguments raw', async () => {
    const file = await scriptFile('ok.json', {
      responses: [
        { tool_calls: [{ name: 'read_file', arguments: '{"path": "a.txt"' }] },
        { content: 'done', usage: { input_tokens: 10, output_tokens: 5 }, finish_reason: 'stop' },
      ],
    });
    const responses = await loadScript(file);
    expect(responses).toHaveLength(2);
    expect(responses[0]!.tool_calls![0]!.arguments).toBe('{"path": "a.txt"');
    expect(responses[1]!.usage).toEqual({ input_tokens: 10, output_tokens: 5 });
  });

  it('loads agents.main by default and a named agent on request', async () => {
    const file = await scriptFile('agents.json', {
      agents: { main: { responses: [{ content: 'top' }] }, helper: { responses: [{ content: 'sub' }] } },
    });
    expect((await loadScript(file))[0]!.content).toBe('top');
    expect((await loadScript(file, 'helper'))[0]!.content).toBe('sub');
  });

  it('reports a missing file with a hint', async () => {
    const missing = path.join(dir, 'nope.json');
    const err = await loadError(missing);
    expect(err.message).toBe(`script file not found: ${missing}`);
    expect(err.hint).toBe('pass --model scripted:<path to a JSON script>');
  });

  it('reports invalid JSON with its position', async () => {
    const file = await scriptFile('bad.json', '{\n  "responses": [\n    { "content": }\n  ]\n}');
    const err = await loadError(file);
    expect(err.message).toContain('is not valid JSON');
    expect(err.message).toContain("unexpected \"}\" at line 3, column 18");
  });

  it('reports the JSON path and expectation of a schema violation', async () => {
    const wrongType = await scriptFile('type.json', { responses: [{ tool_calls: [{ name: 7, arguments: {} }] }] });
    expect((await loadError(wrongType)).message).toMatch(/invalid at responses\[0\]\.tool_calls\[0\]\.name: expected string, got number/);

    const badEnum = await scriptFile('enum.json', { responses: [{ finish_reason: 'done' }] });
    expect((await loadError(badEnum)).message).toMatch(/responses\[0\]\.finish_reason: expected one of "stop", "tool_calls"/);

    const badError = await scriptFile('err.json', { responses: [{ error: { type: 'teapot' } }] });
    expect((await loadError(badError)).message).toContain('responses[0].error.type');

    const badArgs = await scriptFile('args.json', { responses: [{ tool_calls: [{ name: 'x', arguments: 3 }] }] });
    expect((await loadError(badArgs)).message).toContain('responses[0].tool_calls[0].arguments: expected an object');

    const missingKey = await scriptFile('missing.json', { agents: { main: {} } });
    expect((await loadError(missingKey)).message).toContain('invalid at agents.main: missing required key "responses" (array)');

    const notObject = await scriptFile('array.json', [1, 2]);
    expect((await loadError(notObject)).message).toContain('invalid at (root): expected { "responses": [...] }');
  });

  it('rejects unknown keys so typos are caught', async () => {
    const file = await scriptFile('typo.json', { responses: [{ contnet: 'hi' }] });
    expect((await loadError(file)).message).toMatch(/invalid at responses\[0\]: unknown key "contnet"/);
  });

  it('reports an agent missing from agents, naming the ones present', async () => {
    const file = await scriptFile('agents2.json', { agents: { helper: { responses: [] } } });
    expect((await loadError(file)).message).toContain('has no agent "main" (agents: "helper")');
    const plain = await scriptFile('plain.json', { responses: [] });
    expect((await loadError(plain, 'helper')).message).toContain('has no agent "helper"');
  });

  it('exports a schema that accepts both forms', () => {
    expect(ScriptSchema.safeParse({ responses: [] }).success).toBe(true);
    expect(ScriptSchema.safeParse({ agents: { main: { responses: [] } } }).success).toBe(true);
    expect(ScriptSchema.safeParse({ replies: [] }).success).toBe(false);
  });
});

describe('jsonErrorPosition', () => {
  it('agrees with JSON.parse on what is valid, and locates the first fault', () => {
    for (const ok of ['{}', '[1,-2.5e3,"a\\u00e9",true,null]', ' {"a":{"b":[]}} ']) {
      expect(jsonErrorPosition(ok)).toBeNull();
    }
    expect(jsonErrorPosition('{"a":1,}')).toMatchObject({ offset: 7, line: 1, column: 8 });
    expect(jsonErrorPosition('[1,2')).toMatchObject({ offset: 4, problem: 'unexpected end of input' });
    expect(jsonErrorPosition('{"a":1}x')).toMatchObject({ offset: 7 });
    expect(jsonErrorPosition('"a\nb"')).toMatchObject({ offset: 2 });
    expect(jsonErrorPosition('01')).toMatchObject({ offset: 1 });
  });
});
