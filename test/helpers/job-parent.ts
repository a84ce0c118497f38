// A host process for the dies-with-its-host tests of the shell executor: starts one job, prints its
// process identity as one JSON line, and never exits on its own, so the test can SIGKILL it.
// argv: <workspace> <bwrapPath|""> <command>.
import { startShellJob } from '../../src/jobs/shell-executor.js';

const [workspace, bwrapPath, command] = process.argv.slice(2);
if (!workspace || bwrapPath === undefined || !command) {
  process.stderr.write('usage: job-parent <workspace> <bwrapPath|""> <command>\n');
  process.exit(2);
}
const job = await startShellJob(
  { command, timeoutMs: 600_000 },
  { workspace, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, sandbox: { bwrapPath: bwrapPath === '' ? null : bwrapPath, network: false, envAllow: [] } },
  { sink: { write: () => undefined } },
);
process.stdout.write(`${JSON.stringify(job.identity)}\n`);
await job.result;
