import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isId } from '../../src/protocol/ids.js';
import { DEFAULT_OBSERVATION_BUDGET_BYTES, shapeObservation } from '../../src/tools/observation.js';
import { createRedactor } from '../../src/tools/redact.js';

const redactor = createRedactor(['configured-secret-42']);
const bytesOf = (s: string): number => Buffer.byteLength(s, 'utf8');
const numbered = (n: number, width = 60): string =>
  Array.from({ length: n }, (_, i) => `line ${i + 1} `.padEnd(width, 'x')).join('\n') + '\n';

/** The output split into its header line and the rest, which must fit the budget. */
function parts(output: string): { header: string; body: string } {
  const nl = output.indexOf('\n');
  return { header: output.slice(0, nl), body: output.slice(nl + 1) };
}

describe('shapeObservation: text', () => {
  it('shows text within the budget whole, redacted, with no artifact', () => {
    const shaped = shapeObservation('ok\nTOKEN=abc123 and configured-secret-42\n', { redactor });
    expect(shaped).toEqual({ output: 'ok\nTOKEN=[REDACTED:token] and [REDACTED:configured]\n', redactions: 2, artifact: null });
    expect(shapeObservation(new TextEncoder().encode('héllo'), { redactor }).output).toBe('héllo');
    expect(shapeObservation('', { redactor })).toEqual({ output: '', redactions: 0, artifact: null });
  });

  it('stores text over the budget as an artifact and shows header, head, marker and tail on line boundaries', () => {
    const text = numbered(2000);
    const shaped = shapeObservation(text, { redactor, budgetBytes: DEFAULT_OBSERVATION_BUDGET_BYTES });
    const a = shaped.artifact!;
    expect(a).toMatchObject({ binary: false, lines: 2000, bytes: bytesOf(text) });
    expect(isId('artifact', a.id)).toBe(true);
    expect(a.digest).toBe(`sha256:${createHash('sha256').update(text).digest('hex')}`);
    expect(Buffer.from(a.content).toString('utf8')).toBe(text);

    const { header, body } = parts(shaped.output);
    expect(header).toMatch(/^\[output is 119\.1 KiB, 2,000 lines; stored as artifact art_[0-9A-Z]{26} — read more with artifact_read /);
    expect(header).toContain(`{"id":"${a.id}","offset":`);
    expect(header).toContain(`{"id":"${a.id}","grep":"pattern"}`);
    expect(bytesOf(body)).toBeLessThanOrEqual(DEFAULT_OBSERVATION_BUDGET_BYTES);

    const lines = body.split('\n');
    expect(lines[0]).toBe('line 1 '.padEnd(60, 'x'));
    expect(lines[lines.length - 1]).toBe('line 2000 '.padEnd(60, 'x'));
    const marker = lines.findIndex((l) => l.startsWith('[…'));
    // Every shown line is whole, and the marker counts exactly the lines between head and tail.
    for (const l of lines) if (l !== lines[marker]) expect(l).toMatch(/^line \d+ x+$/);
    const lastHead = Number(/^line (\d+)/.exec(lines[marker - 1]!)![1]);
    const firstTail = Number(/^line (\d+)/.exec(lines[marker + 1]!)![1]);
    expect(lines[marker]).toMatch(new RegExp(`^\\[… ${(firstTail - lastHead - 1).toLocaleString('en-US')} lines omitted \\(\\d+\\.\\d KiB\\) …\\]$`));
    expect(header).toContain(`"offset":${lastHead + 1},"limit":400`);
  });

  it('cuts one huge line on UTF-8 character boundaries', () => {
    const text = 'é€😀'.repeat(10_000); // 2-, 3- and 4-byte characters, no newline
    const shaped = shapeObservation(new TextEncoder().encode(text), { redactor, budgetBytes: 4096 });
    const { body } = parts(shaped.output);
    expect(body).not.toContain('\uFFFD');
    expect(bytesOf(body)).toBeLessThanOrEqual(4096);
    expect(body).toMatch(/^é€😀/);
    expect(body).toMatch(/\n\[… \d+\.\d KiB omitted …\]\n/);
    expect(shaped.artifact!.lines).toBe(1);
  });

  it('honors head and tail sizes, shrinking them when they would not fit', () => {
    const text = numbered(1000, 20);
    const small = parts(shapeObservation(text, { redactor, budgetBytes: 4096, headBytes: 200, tailBytes: 100 }).output).body;
    expect(bytesOf(small)).toBeLessThan(400);
    const big = parts(shapeObservation(text, { redactor, budgetBytes: 4096, headBytes: 8000, tailBytes: 8000 }).output).body;
    expect(bytesOf(big)).toBeLessThanOrEqual(4096);
  });

  it('redacts before storing: the artifact holds the redacted text', () => {
    const text = `${numbered(500)}AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n${numbered(500)}`;
    const shaped = shapeObservation(text, { redactor });
    expect(shaped.redactions).toBe(1);
    const stored = Buffer.from(shaped.artifact!.content).toString('utf8');
    expect(stored).not.toContain('wJalrXUtnFEMI');
    expect(stored).toContain('AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]');
    expect(shaped.artifact!.digest).toBe(`sha256:${createHash('sha256').update(stored).digest('hex')}`);
  });

  it('gives the same artifact ID for the same output, string or bytes', () => {
    const text = numbered(1000);
    const a = shapeObservation(text, { redactor }).artifact!;
    const b = shapeObservation(Buffer.from(text), { redactor }).artifact!;
    expect(b.id).toBe(a.id);
    expect(shapeObservation(`${text}!`, { redactor }).artifact!.id).not.toBe(a.id);
  });

  it('handles 50 MB within the budget and stores every byte', () => {
    const big = Buffer.alloc(50 * 1024 * 1024, 'the quick brown fox jumps over the lazy dog 0123456789\n');
    const shaped = shapeObservation(big, { redactor });
    const { header, body } = parts(shaped.output);
    expect(header).toMatch(/^\[output is 50\.0 MiB, 953,251 lines;/);
    expect(bytesOf(body)).toBeLessThanOrEqual(DEFAULT_OBSERVATION_BUDGET_BYTES);
    expect(shaped.artifact!.bytes).toBe(big.length);
    expect(Buffer.from(shaped.artifact!.content).equals(big)).toBe(true);
  }, 60_000);
});

describe('shapeObservation: binary', () => {
  const withMagic = (magic: number[]): Uint8Array => new Uint8Array([...magic, 0, 1, 2, 0, 0xff]);

  it.each([
    ['PNG image', [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]],
    ['gzip data', [0x1f, 0x8b, 0x08]],
    ['zip archive', [0x50, 0x4b, 0x03, 0x04]],
    ['ELF executable', [0x7f, 0x45, 0x4c, 0x46]],
    ['PDF document', [0x25, 0x50, 0x44, 0x46, 0x2d]],
    ['binary data', [0x01, 0x02]],
  ])('stores %s raw and only describes it', (what, magic) => {
    const bytes = withMagic(magic);
    const shaped = shapeObservation(bytes, { redactor });
    expect(shaped.artifact).toMatchObject({ binary: true, lines: null, bytes: bytes.length });
    expect(shaped.artifact!.content).toEqual(bytes);
    expect(shaped.output).toBe(
      `[binary output (${what}, ${bytes.length} B) stored as artifact ${shaped.artifact!.id}; it is not shown as text. ` +
        `artifact_read {"id":"${shaped.artifact!.id}"} shows its type and a hex dump]`,
    );
  });

  it('treats invalid UTF-8 and strings with NUL as binary: unshown, and stored with its secrets masked byte for byte', () => {
    const latin1 = Buffer.from('caf\xe9 TOKEN=abc123secret', 'latin1');
    const shaped = shapeObservation(latin1, { redactor });
    expect(shaped).toMatchObject({ artifact: { binary: true, bytes: latin1.length } });
    expect(shaped.redactions).toBeGreaterThan(0);
    expect(shaped.output).toContain('binary data or text that is not UTF-8');
    expect(shaped.output).not.toContain('abc123');
    const stored = Buffer.from(shaped.artifact!.content).toString('latin1');
    expect(stored).not.toContain('abc123secret');
    expect(stored.startsWith('caf\xe9 ')).toBe(true);
    const nul = shapeObservation('a\u0000b', { redactor });
    expect(nul.artifact).toMatchObject({ binary: true, bytes: 3 });
    expect(nul.redactions).toBe(0);
  });

  it('masks key lines that a NUL made binary (sed -n 3,6p key.pem; printf \\0)', () => {
    const body = ['MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj', 'MkUCvTRDsNgrJBN9M8rNpaTlBbzYHxmqV3oY2tdQ8dMvlVSfdCqh7OU9ARWvgFpz', 'G2N1AyUBNN2pGYjlRpgmhiEnWDs0WmsGVVdPqmd0JQDvHnhLJkI+DjaBD5j0oBFD'];
    const bytes = Buffer.concat([Buffer.from(`${body.join('\n')}\n`), Buffer.from([0])]);
    const shaped = shapeObservation(bytes, { redactor });
    const stored = Buffer.from(shaped.artifact!.content).toString('latin1');
    for (const line of body) expect(stored).not.toContain(line);
    expect(shaped.artifact!.bytes).toBe(bytes.length);
  });
});
