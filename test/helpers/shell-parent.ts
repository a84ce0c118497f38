// A parent process for the dies-with-parent test: runs one shell tool call and never exits on
// its own, so the test can SIGKILL it mid-call. argv: <workspace> <bwrapPath|""> <command>.
import { shellTool } from '../../src/tools/builtins/shell.js';
import { toolContext } from '../tools/context.js';

const [workspace, bwrapPath, command] = process.argv.slice(2);
if (!workspace || bwrapPath === undefined || !command) {
  process.stderr.write('usage: shell-parent <workspace> <bwrapPath|""> <command>\n');
  process.exit(2);
}
const ctx = toolContext(workspace, undefined, {
  env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  sandbox: { bwrapPath: bwrapPath === '' ? null : bwrapPath, network: false, envAllow: [] },
});
process.stdout.write('started\n');
await shellTool.execute({ command, timeout_ms: 600_000 }, ctx);
