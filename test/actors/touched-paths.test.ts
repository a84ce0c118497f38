import { describe, expect, it } from 'vitest';
import { touchedPaths } from '../../src/actors/effects/tool-runner.js';

// Where a call read or wrote, for a deeper AGENTS.md to apply from then on (docs/context.md).
describe('touchedPaths', () => {
  it('names a file tool\'s path, a shell\'s cwd and the files a patch changes; nothing for other tools', () => {
    expect(touchedPaths('read_file', { path: 'pkg/deep/a.js' })).toEqual(['pkg/deep/a.js']);
    expect(touchedPaths('list_dir', { path: 'pkg' })).toEqual(['pkg']);
    expect(touchedPaths('search', { pattern: 'x', path: 'lib' })).toEqual(['lib']);
    expect(touchedPaths('search', { pattern: 'x' })).toEqual([]);
    expect(touchedPaths('shell', { command: 'ls', cwd: 'tools/gen' })).toEqual(['tools/gen']);
    expect(touchedPaths('shell', { command: 'ls', cwd: '.' })).toEqual([]);
    const patch = '--- a/pkg/x.js\n+++ b/pkg/x.js\n@@ -1 +1 @@\n-a\n+b\n--- /dev/null\n+++ b/lib/new.js\n@@ -0,0 +1 @@\n+c\n';
    expect(touchedPaths('apply_patch', { patch })).toEqual(['pkg/x.js', 'lib/new.js']);
    expect(touchedPaths('update_plan', { items: [] })).toEqual([]);
    expect(touchedPaths('read_file', null)).toEqual([]);
  });
});
