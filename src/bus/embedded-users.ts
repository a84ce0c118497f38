import { mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

// Who uses a data dir's embedded nats-server: one file per process, `<nats dir>/users/<pid>`,
// holding the process's start time (so a pid the system gave to another process later is not
// taken for a user). The server outlives every command that uses it: the last one to leave stops
// it. A process that dies leaves its file behind, and it no longer counts once its pid is gone.
// One process may acquire the server more than once (a restart under it, a second bus): it is
// one user, counted here, and leaves when its last acquisition is released.

/** Acquisitions of this process, by users directory. */
const held = new Map<string, number>();

/** The users directory under a data dir's nats dir. */
export function usersDir(natsDir: string): string {
  return join(natsDir, 'users');
}

/** Counts this process as a user (its file is written on its first acquisition). */
export function joinUsers(dir: string): void {
  const n = held.get(dir) ?? 0;
  held.set(dir, n + 1);
  if (n > 0) return;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // synchronous: a join and a leave of one process never interleave halfway through
  writeFileSync(join(dir, String(process.pid)), startTimeOf(process.pid) ?? '');
}

/** Takes one acquisition of this process back; true when it was the last (the process no longer uses the server). */
export function leaveUsers(dir: string): boolean {
  const n = held.get(dir) ?? 0;
  if (n > 1) {
    held.set(dir, n - 1);
    return false;
  }
  held.delete(dir);
  try {
    unlinkSync(join(dir, String(process.pid)));
  } catch {
    // already gone: nothing to take back
  }
  return true;
}

/** The pids of the other live processes that use the server; files of processes that are gone are removed. */
export function otherUsers(dir: string): number[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const live: number[] = [];
  for (const name of names) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) continue;
    let recorded = '';
    try {
      recorded = readFileSync(join(dir, name), 'utf8');
    } catch {
      continue;
    }
    const now = startTimeOf(pid);
    const alive = now !== undefined ? recorded === '' || recorded === now : pidExists(pid);
    if (alive) live.push(pid);
    else {
      try {
        unlinkSync(join(dir, name));
      } catch {
        // another process removed it first
      }
    }
  }
  return live;
}

/** A process's start time in clock ticks since boot (`/proc/<pid>/stat`), undefined when it is gone or there is no /proc. */
function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the command name (field 2) may hold spaces and parentheses: fields are counted after its last `)`
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
