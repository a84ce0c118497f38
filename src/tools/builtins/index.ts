import type { ToolDefinition } from '../tool.js';
import { listDirTool } from './list-dir.js';
import { readFileTool } from './read-file.js';
import { searchTool } from './search.js';
import { writeFileTool } from './write-file.js';

export { listDirTool } from './list-dir.js';
export { readFileTool } from './read-file.js';
export { searchTool } from './search.js';
export { writeFileTool } from './write-file.js';

/** The built-in workspace tools: read_file, list_dir, search, write_file. */
export function builtinTools(): ToolDefinition<any>[] {
  return [readFileTool, listDirTool, searchTool, writeFileTool];
}
