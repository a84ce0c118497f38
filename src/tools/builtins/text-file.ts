import path from 'node:path';
import type { ResourceKey } from '../tool.js';

/** Bytes sniffed for NUL to decide a file is binary, as git and grep do. */
const SNIFF_BYTES = 8192;

/** True when the bytes look binary (a NUL in the first 8 KiB). */
export function looksBinary(bytes: Uint8Array): boolean {
  return bytes.subarray(0, SNIFF_BYTES).includes(0);
}

/**
 * The resource key of a workspace path. Computed lexically (no realpath) because `resources`
 * is synchronous; two spellings of one path still normalize to one key.
 */
export function pathResource(workspace: string, requested: string, mode: ResourceKey['mode']): ResourceKey {
  return { key: `path:${path.resolve(workspace, requested)}`, mode };
}

/** Splits text into lines; a final newline ends the last line rather than starting an empty one. */
export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split(/\r?\n/);
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** A path as the model should see it: relative to the workspace, with `/` separators. */
export function displayPath(root: string, absolute: string): string {
  const rel = path.relative(root, absolute);
  return rel === '' ? '.' : rel.split(path.sep).join('/');
}
