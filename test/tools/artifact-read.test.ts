import { derivedId } from '../../src/protocol/ids.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { describe, expect, it } from 'vitest';
import { artifactReadTool, createArtifactReadTool, type ArtifactReadInput } from '../../src/tools/builtins/artifact-read.js';
import { executeTool } from '../../src/tools/execute.js';
import { shapeObservation } from '../../src/tools/observation.js';
import { createRedactor } from '../../src/tools/redact.js';
import type { ArtifactReader, ToolDefinition } from '../../src/tools/tool.js';
import { toolContext } from './context.js';

const redactor = createRedactor();

/** Artifacts as the pipeline stores them: shaped output, kept by ID in a map. */
function store(): { reader: ArtifactReader; put(raw: string | Uint8Array): string; putRaw(bytes: Uint8Array): string } {
  const blobs = new Map<string, Uint8Array>();
  return {
    reader: { read: async (id) => blobs.get(id) },
    // as an artifact written before binary output was stored redacted
    putRaw(bytes) {
      const id = derivedId('artifact', sha256Digest(bytes));
      blobs.set(id, bytes);
      return id;
    },
    put(raw) {
      const { artifact } = shapeObservation(raw, { redactor });
      if (!artifact) throw new Error('expected an artifact');
      blobs.set(artifact.id, artifact.content);
      return artifact.id;
    },
  };
}

async function run(reader: ArtifactReader, input: ArtifactReadInput, tool: ToolDefinition<ArtifactReadInput> = artifactReadTool) {
  const result = await executeTool(tool, tool.input.parse(input), toolContext('/nonexistent', undefined, { artifacts: reader }), 10_000);
  return { ...result, output: String(result.output) };
}

const lines = Array.from({ length: 1234 }, (_, i) => `row ${i + 1}: ${i % 100 === 0 ? 'ERROR disk full' : 'fine'}`);
const text = lines.join('\n') + '\n';

describe('artifact_read: definition', () => {
  it('is a read-only tool with no resources', () => {
    expect(artifactReadTool).toMatchObject({ name: 'artifact_read', version: '1', level: 'read' });
    expect(artifactReadTool.executionSemantics({ id: 'x' }, { workspace: '/' })).toEqual({ effects: 'none', retry: 'auto' });
    expect(artifactReadTool.resources({ id: 'x' }, { workspace: '/' })).toEqual([]);
    expect(() => artifactReadTool.input.parse({ id: 'x', extra: 1 })).toThrow();
  });
});

describe('artifact_read: text', () => {
  it('pages by lines with a header, from the offset the preview suggests', async () => {
    const s = store();
    const id = s.put(text);
    const first = await run(s.reader, { id });
    expect(first.ok).toBe(true);
    const out = first.output.split('\n');
    expect(out[0]).toBe(`[lines 1-400 of 1,234 in ${id}; pass offset=401 to read more]`);
    expect(out.slice(1)).toEqual(lines.slice(0, 400));

    const last = await run(s.reader, { id, offset: 1230, limit: 10 });
    expect(last.output).toBe(`[lines 1230-1234 of 1,234 in ${id}]\n${lines.slice(1229).join('\n')}`);
  });

  it('refuses an offset past the end', async () => {
    const s = store();
    const id = s.put(text);
    const result = await run(s.reader, { id, offset: 5000 });
    expect(result).toMatchObject({ ok: false, error: { code: 'tool.invalid_range' } });
    expect(result.output).toContain('has 1,234 lines');
  });

  it('keeps a page within the observation budget, cutting a huge line and pointing to grep', async () => {
    const s = store();
    const id = s.put(`short\n${'x'.repeat(100_000)}needle\nafter\n`);
    const page = await run(s.reader, { id });
    expect(page.output.split('\n')[0]).toBe(`[lines 1-1 of 3 in ${id}; pass offset=2 to read more]`);
    const huge = await run(s.reader, { id, offset: 2 });
    expect(huge.output.split('\n')[0]).toMatch(/^\[lines 2-2 of 3 in art_\w+ \(line 2 cut at [\d,]+ of 100,006 characters; grep finds text within it\); pass offset=3/);
    expect(Buffer.byteLength(huge.output)).toBeLessThan(16384);
    const found = await run(s.reader, { id, grep: 'needle' });
    expect(found.output).toMatch(/\n2: …x+needle$/);
  });

  it('greps with line numbers, a regex or literal text', async () => {
    const s = store();
    const id = s.put(text);
    const found = await run(s.reader, { id, grep: 'ERROR\\s+disk' });
    const out = found.output.split('\n');
    expect(out[0]).toBe(`[lines matching "ERROR\\\\s+disk" in ${id} (1,234 lines)]`);
    expect(out.slice(1)).toEqual(lines.flatMap((l, i) => (l.includes('ERROR') ? [`${i + 1}: ${l}`] : [])));

    const literal = await run(s.reader, { id, grep: 'row 7:(' });
    expect(literal.output).toMatch(/^no matches for "row 7:\(" in art_\w+ \(1,234 lines\)$/);
    const none = await run(s.reader, { id, grep: 'nothing here' });
    expect(none.ok).toBe(true);
  });

  it('caps grep at 200 matches and continues from an offset', async () => {
    const s = store();
    const id = s.put(text);
    const capped = await run(s.reader, { id, grep: 'fine' });
    const out = capped.output.split('\n');
    expect(out).toHaveLength(1 + 200 + 1);
    expect(out[201]).toMatch(/^\[stopped at 200 matches; pass offset=(\d+) to continue/);
    const next = Number(/offset=(\d+)/.exec(out[201]!)![1]);
    const rest = await run(s.reader, { id, grep: 'fine', offset: next, limit: 3 });
    expect(rest.output.split('\n')[1]).toBe(`${next}: ${lines[next - 1]}`);
  });
});

describe('artifact_read: IDs', () => {
  it('says how to find an ID when none is stored under it', async () => {
    const result = await run(store().reader, { id: 'art_0Q2V8M4K7T9H3C6X1B5N8R2W4Z' });
    expect(result).toMatchObject({ ok: false, error: { code: 'tool.not_found' } });
    expect(result.output).toContain('header of a tool output');
  });

  it.each(['art_123', 'call_0Q2V8M4K7T9H3C6X1B5N8R2W4Z', 'art_0Q2V8M4K7T9H3C6X1B5N8R2W4I', '../etc/passwd'])('refuses %s', async (id) => {
    const result = await run(store().reader, { id });
    expect(result).toMatchObject({ ok: false, error: { code: 'tool.invalid_id' } });
  });

  it('accepts an ID with a lowercase body', async () => {
    const s = store();
    const id = s.put(text);
    const result = await run(s.reader, { id: `art_${id.slice(4).toLowerCase()}`, limit: 1 });
    expect(result.output).toBe(`[lines 1-1 of 1,234 in ${id}; pass offset=2 to read more]\nrow 1: ERROR disk full`);
  });
});

describe('artifact_read: binary', () => {
  const png = new Uint8Array(1000).map((_, i) => (i * 31) % 256);
  png.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

  it('describes it and pages a hex dump by 16-byte rows', async () => {
    const s = store();
    const id = s.put(png);
    const first = await run(s.reader, { id });
    const out = first.output.split('\n');
    expect(out[0]).toBe(
      `[${id} is binary (PNG image, 1000 B) and cannot be shown as text. Hex dump of bytes 0-255, rows 1-16 of 63; pass offset=17 to read more]`,
    );
    expect(out[1]).toBe('00000000  89 50 4e 47 0d 0a 1a 0a  f8 17 36 55 74 93 b2 d1  |.PNG......6Ut...|');
    expect(out).toHaveLength(17);
    const last = await run(s.reader, { id, offset: 63 });
    // 1000 bytes: the last row holds 8, padded so the ASCII column stays aligned
    expect(last.output.split('\n')).toEqual([
      `[${id} is binary (PNG image, 1000 B) and cannot be shown as text. Hex dump of bytes 992-999, rows 63-63 of 63]`,
      `000003e0  20 3f 5e 7d 9c bb da f9${' '.repeat(25)}  | ?^}....|`,
    ]);
    expect(await run(s.reader, { id, grep: 'x' })).toMatchObject({ ok: false, error: { code: 'tool.binary_artifact' } });
  });

  it('masks bytes that look like secrets, including configured values with the pipeline redactor', async () => {
    const s = store();
    const bytes = Buffer.concat([Buffer.from([0, 1, 2]), Buffer.from('ghp_0123456789abcdefghijABCDEFGHIJ012345 my-configured-value\0')]);
    // what the pipeline stores has the token masked already (its bytes are `*`): nothing left to find
    const stored = await run(s.reader, { id: s.put(bytes) });
    expect(stored.output).not.toMatch(/67 68 70 5f/);
    expect(stored.output).toContain('2a 2a 2a 2a');
    const id = s.putRaw(bytes);
    const plain = await run(s.reader, { id });
    expect(plain.output).toContain('40 bytes that look like secrets are shown as **');
    expect(plain.output).not.toMatch(/67 68 70 5f/); // "ghp_"
    expect(plain.output).toContain('6d 79 2d 63'); // "my-c": the built-in patterns do not know the configured value
    const tool = createArtifactReadTool({ redactor: createRedactor(['my-configured-value']) });
    const masked = await run(s.reader, { id }, tool);
    expect(masked.output).toContain('59 bytes that look like secrets');
    expect(masked.output).not.toContain('6d 79 2d 63');
  });
});
