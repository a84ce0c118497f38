import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { builtinTools } from '../../src/tools/builtins/index.js';
import { createToolRegistry } from '../../src/tools/registry.js';
import type { ToolDefinition } from '../../src/tools/tool.js';

const registry = createToolRegistry(builtinTools());
const visible = ['read_file', 'list_dir', 'search'];

describe('createToolRegistry', () => {
  it('gives JSON Schema specs with the contract field names, sorted, without $schema', () => {
    const specs = registry.specs();
    expect(specs.map((s) => s.name)).toEqual(['apply_patch', 'artifact_read', 'ask_user', 'cancel_job', 'get_goal', 'interrupt_agent', 'job_status', 'list_dir', 'load_skill', 'memory', 'memory_search', 'read_file', 'report', 'search', 'send_message', 'shell', 'spawn_agent', 'start_job', 'start_workflow', 'stop', 'update_goal', 'update_plan', 'wait_agents', 'wait_jobs', 'write_file']);
    const byName = Object.fromEntries(specs.map((s) => [s.name, s.parameters]));
    for (const parameters of specs.map((s) => s.parameters)) {
      expect(parameters).not.toHaveProperty('$schema');
      expect(parameters).toMatchObject({ type: 'object', additionalProperties: false });
    }
    expect(Object.keys(byName.read_file!.properties as object)).toEqual(['path', 'offset', 'limit']);
    expect(byName.read_file!.required).toEqual(['path']);
    expect(Object.keys(byName.list_dir!.properties as object)).toEqual(['path']);
    expect(Object.keys(byName.search!.properties as object)).toEqual(['pattern', 'path']);
    expect(byName.search!.required).toEqual(['pattern']);
    expect(byName.write_file!.required).toEqual(['path', 'content']);
    expect(Object.keys(byName.ask_user!.properties as object)).toEqual(['question', 'options', 'allow_free_text', 'sensitive']);
    expect(byName.ask_user!.required).toEqual(['question']);
    expect(registry.specs(['search', 'read_file']).map((s) => s.name)).toEqual(['read_file', 'search']);
    expect(registry.names()).toEqual(['apply_patch', 'artifact_read', 'ask_user', 'cancel_job', 'get_goal', 'interrupt_agent', 'job_status', 'list_dir', 'load_skill', 'memory', 'memory_search', 'read_file', 'report', 'search', 'send_message', 'shell', 'spawn_agent', 'start_job', 'start_workflow', 'stop', 'update_goal', 'update_plan', 'wait_agents', 'wait_jobs', 'write_file']);
    expect(registry.get('read_file')?.name).toBe('read_file');
  });

  it('refuses duplicate names', () => {
    expect(() => createToolRegistry([...builtinTools(), builtinTools()[0]!])).toThrow(/duplicate tool name "read_file"/);
  });

  describe('reconcile semantics without a reconcile function', () => {
    const base: ToolDefinition<{ mode: string }> = {
      name: 'sync_remote',
      version: '1',
      description: 'Push to a remote',
      input: z.strictObject({ mode: z.string() }),
      level: 'network',
      executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'reconcile' } }),
      resources: () => [],
      execute: async () => ({ ok: true, output: 'pushed' }),
    };

    it('is a registration error that names the tool and what to do', () => {
      let err: unknown;
      try {
        createToolRegistry([...builtinTools(), base]);
      } catch (e) {
        err = e;
      }
      expect(err).toMatchObject({ name: 'ConfigError', code: 'tool.reconcile_missing', message: 'tool "sync_remote" declares reconcile recovery but has no reconcile function' });
      expect((err as { userMessage(): string }).userMessage()).toMatch(/give it reconcile\(input, ctx\)/);
      // with one, it registers
      expect(() => createToolRegistry([{ ...base, reconcile: async () => ({ status: 'not_applied' }) }])).not.toThrow();
    });

    it('semantics that read the input are checked when a call resolves to reconcile', () => {
      const byInput: ToolDefinition<{ mode: string }> = {
        ...base,
        executionSemantics: (input) => (input.mode === 'dry'
          ? { effects: 'none', retry: 'auto' }
          : { effects: 'possible', recovery: { kind: 'reconcile' } }),
      };
      const r = createToolRegistry([byInput]);
      expect(r.resolveCall('sync_remote', '{"mode":"dry"}', null)).toMatchObject({ status: 'valid' });
      expect(() => r.resolveCall('sync_remote', '{"mode":"push"}', null)).toThrow(/declares reconcile recovery but has no reconcile function/);
    });
  });
});

describe('resolveCall', () => {
  it('resolves a valid call with its parsed input and effects', () => {
    const call = registry.resolveCall('read_file', '{"path":"a.txt","offset":2}', visible);
    expect(call).toMatchObject({ status: 'valid', input: { path: 'a.txt', offset: 2 }, effects: { effects: 'none', retry: 'auto' } });
    expect(registry.resolveCall('list_dir', '', null)).toMatchObject({ status: 'valid', input: {} });
  });

  it('answers a tool outside the visible set exactly like an unknown one', () => {
    const hidden = registry.resolveCall('write_file', '{"path":"a","content":"b"}', visible);
    const unknown = registry.resolveCall('delete_everything', '{}', visible);
    expect(hidden).toEqual({ status: 'unknown_tool', error: 'unknown tool "write_file"; available tools: list_dir, read_file, search' });
    expect(unknown).toEqual({
      status: 'unknown_tool',
      error: 'unknown tool "delete_everything"; available tools: list_dir, read_file, search',
    });
    expect(registry.resolveCall('write_file', '{"path":"a","content":"b"}', null).status).toBe('valid');
  });

  it('explains arguments that are not JSON or not an object', () => {
    const notJson = registry.resolveCall('read_file', '{"path": ', visible);
    expect(notJson.status).toBe('invalid_arguments');
    expect(notJson.status === 'invalid_arguments' && notJson.error).toMatch(/^arguments for read_file are not valid JSON/);
    expect(registry.resolveCall('read_file', '["a.txt"]', visible)).toEqual({
      status: 'invalid_arguments',
      error: 'arguments for read_file must be a JSON object, got an array',
    });
  });

  it('names the field at fault and what was expected', () => {
    const errorOf = (args: string): string => {
      const call = registry.resolveCall('read_file', args, visible);
      if (call.status !== 'invalid_arguments') throw new Error(`expected invalid_arguments, got ${call.status}`);
      return call.error;
    };
    expect(errorOf('{}')).toBe('invalid arguments for read_file: field "path" is required (expected string)');
    expect(errorOf('{"path": 3}')).toBe('invalid arguments for read_file: field "path" must be of type string, got an integer');
    expect(errorOf('{"path": "a", "offset": 0}')).toBe('invalid arguments for read_file: field "offset" must be at least 1');
    expect(errorOf('{"pth": "a"}')).toBe('invalid arguments for read_file: field "path" is required (expected string); unknown field "pth"');
  });

  it('describes enum failures by their options', () => {
    const tool: ToolDefinition<{ mode: 'a' | 'b' }> = {
      name: 'pick',
      version: '1',
      description: 'pick a mode',
      input: z.strictObject({ mode: z.enum(['a', 'b']) }),
      level: 'read',
      executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
      resources: () => [],
      execute: async () => ({ ok: true, output: '' }),
    };
    expect(createToolRegistry([tool]).resolveCall('pick', '{"mode":"c"}', null)).toEqual({
      status: 'invalid_arguments',
      error: 'invalid arguments for pick: field "mode" must be one of "a", "b"',
    });
  });
});
