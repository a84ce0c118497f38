import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/protocol/errors.js';
import { parseWorkflow, readWorkflowFile } from '../../src/jobs/workflow-file.js';

const JSON_FILE = JSON.stringify({
  name: 'triage',
  nodes: [
    { id: 'test', run: 'shell', command: 'npm test', retries: 1, timeout_seconds: 600 },
    {
      id: 'classify',
      run: 'model',
      prompt: 'Is the failure a regression?',
      output_schema: { type: 'object', properties: { kind: { type: 'string' } }, required: ['kind'] },
      needs: ['test'],
    },
    { id: 'fix', run: 'agent', task: 'Fix the regression', tools: ['read_file', 'shell'], needs: ['classify'], when: { node: 'classify', path: 'kind', equals: 'regression' } },
  ],
});

const TOML_FILE = `
name = "triage"

[[nodes]]
id = "test"
run = "shell"
command = "npm test"
retries = 1
timeout_seconds = 600

[[nodes]]
id = "classify"
run = "model"
prompt = "Is the failure a regression?"
needs = ["test"]
output_schema = { type = "object", properties = { kind = { type = "string" } }, required = ["kind"] }

[[nodes]]
id = "fix"
run = "agent"
task = "Fix the regression"
tools = ["read_file", "shell"]
needs = ["classify"]
when = { node = "classify", path = "kind", equals = "regression" }
`;

/** The ConfigError lines a workflow's nodes give, without the file name each starts with. */
function problems(nodes: unknown[], extra: object = {}): string[] {
  try {
    parseWorkflow(JSON.stringify({ name: 'w', nodes, ...extra }), 'w.json');
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe('config.workflow');
    return (err as Error).message.split('\n').map((l) => l.replace(/^w\.json: /, ''));
  }
  throw new Error('the workflow was accepted');
}

const sh = (id: string, more: object = {}) => ({ id, run: 'shell', command: `echo ${id}`, ...more });

describe('workflow files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'workflow-file-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the same workflow in JSON and in TOML parses equal', () => {
    const fromJson = parseWorkflow(JSON_FILE, 'triage.json');
    expect(parseWorkflow(TOML_FILE, 'triage.toml')).toEqual(fromJson);
    expect(fromJson.nodes[1]!.needs).toEqual(['test']);
    // defaults filled in: no needs, no retries
    expect(fromJson.nodes[0]).toMatchObject({ needs: [], retries: 1 });
  });

  it('reads the example file, and a file from disk by its extension', () => {
    expect(readWorkflowFile(join(__dirname, '../../examples/workflows/regress.json'))).toEqual({
      name: 'regress',
      nodes: [
        { id: 'a', run: 'shell', command: 'npm test -- focused', needs: [], retries: 0 },
        { id: 'b', run: 'shell', command: 'npm test', needs: ['a'], retries: 0 },
      ],
    });
    const toml = join(dir, 'triage.toml');
    writeFileSync(toml, TOML_FILE);
    expect(readWorkflowFile(toml).name).toBe('triage');
    expect(() => readWorkflowFile(join(dir, 'none.json'))).toThrow(/cannot read .*none\.json/);
  });

  it('a file that is not JSON or TOML says which, and what to do', () => {
    expect(() => parseWorkflow('{"name": ', 'w.json')).toThrow(/^w\.json is not valid JSON: .*; fix the file$/);
    expect(() => parseWorkflow('name = = 1', 'w.toml')).toThrow(/^w\.toml is not valid TOML at line 1, column \d+: .*; fix the file$/);
    expect(() => parseWorkflow('name: w', 'w.yaml')).toThrow('w.yaml is neither JSON nor TOML; write the workflow as a .json or .toml file');
  });

  it('an unknown need names the node, the field and the nodes there are', () => {
    expect(problems([sh('a'), sh('b', { needs: ['x'] })])).toEqual([
      'node b: needs names x, which is not a node of this workflow; use one of a or remove it',
    ]);
  });

  it('a cycle names the nodes on it, in the order they would run', () => {
    expect(problems([sh('a', { needs: ['c'] }), sh('b', { needs: ['a'] }), sh('c', { needs: ['b'] }), sh('d', { needs: ['a'] })])).toEqual([
      'node a: needs form a cycle a → b → c → a; remove one of those needs',
    ]);
    expect(problems([sh('a', { needs: ['a'] })])).toEqual(['node a: needs form a cycle a → a; remove one of those needs']);
  });

  it('duplicate IDs name the ID and the node it repeats', () => {
    expect(problems([sh('a'), sh('b'), sh('a')])).toEqual(["node a: the ID is also node 1's; give each node its own id"]);
  });

  it('a node without run, or with an unknown one, says what to set', () => {
    expect(problems([{ id: 'a', command: 'x' }])).toEqual(['node a: run is missing; set run to "shell", "model" or "agent"']);
    expect(problems([{ id: 'a', run: 'python', command: 'x' }])).toEqual(['node a: run is not shell, model or agent; set run to "shell", "model" or "agent"']);
  });

  it('a node lacking what its run needs, or carrying another run’s field, says so', () => {
    expect(problems([{ id: 'a', run: 'shell' }])).toEqual(['node a: a shell node needs command; add command = "..."']);
    expect(problems([{ id: 'a', run: 'model' }])).toEqual(['node a: a model node needs prompt; add prompt = "..."']);
    expect(problems([{ id: 'a', run: 'agent' }])).toEqual(['node a: an agent node needs task; add task = "..."']);
    expect(problems([sh('a', { prompt: 'hi' })])).toEqual(['node a: prompt is for model nodes; remove it or set run = "model"']);
  });

  it('a when naming a node the node does not depend on says to add the need', () => {
    const model = { id: 'm', run: 'model', prompt: 'p', output_schema: { type: 'object' } };
    expect(problems([model, sh('b'), sh('c', { needs: ['b'], when: { node: 'm', equals: 1 } })])).toEqual([
      "node c: when names m, which c does not depend on; add m to its needs (or to a need's needs)",
    ]);
    // through a need's needs it is fine
    expect(() => parseWorkflow(JSON.stringify({ name: 'w', nodes: [model, sh('b', { needs: ['m'] }), sh('c', { needs: ['b'], when: { node: 'm', path: 'x', equals: 1 } })] }), 'w.json')).not.toThrow();
    expect(problems([model, sh('c', { needs: ['zz'], when: { node: 'zz', equals: 1 } })])[0]).toMatch(/^node c: needs names zz/);
  });

  it('a when must read a model node with an output_schema, with exactly one comparison', () => {
    expect(problems([sh('a'), sh('b', { needs: ['a'], when: { node: 'a', equals: 0 } })])).toEqual([
      "node b: when reads a's JSON output, which only a model node with an output_schema has; give a one or remove the when",
    ]);
    const model = { id: 'm', run: 'model', prompt: 'p', output_schema: { type: 'object' } };
    expect(problems([model, sh('b', { needs: ['m'], when: { node: 'm', path: 'k' } })])).toEqual(['node b: when needs exactly one of equals and not_equals']);
    expect(problems([model, sh('b', { needs: ['m'], when: { node: 'm', code: 'true' } })])).toEqual([
      'node b: when has unknown key code; it takes node, path and equals or not_equals',
    ]);
  });

  it('shape errors name the node by its ID and the field', () => {
    expect(problems([sh('a', { retries: -1 })])).toEqual([expect.stringMatching(/^node a: retries: /)]);
    expect(problems([sh('a', { timeout_seconds: 0 })])).toEqual([expect.stringMatching(/^node a: timeout_seconds: /)]);
    expect(problems([sh('a', { comand: 'x' })])).toEqual([expect.stringMatching(/^node a: unknown key comand; a node takes id, run, command, /)]);
    expect(problems([{ run: 'shell', command: 'x' }])).toEqual(['node 1 (no id): id is missing; add it']);
    expect(problems([])).toEqual(['nodes: the workflow has no nodes; add at least one']);
    expect(problems([sh('a')], { name: undefined })).toEqual(['name is missing; add it']);
    expect(problems([sh('a', { needs: 'b' })])).toEqual([expect.stringMatching(/^node a: needs: .*array/)]);
    expect(() => parseWorkflow('[]', 'w.json')).toThrow('w.json: is not a workflow; write a table (object) with name and nodes');
  });

  it('every problem is a line of its own', () => {
    expect(problems([{ id: 'a', run: 'shell' }, sh('b', { needs: ['x'] }), sh('b')])).toHaveLength(3);
  });
});
