import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { open, type Database, type Key, type RootDatabase } from 'lmdb';

/** The process's LMDB environment and its sub-databases (design §4). */
export interface LmdbStore {
  readonly path: string;
  readonly root: RootDatabase;
  /** Latest snapshot per actor, JSON-encoded. */
  readonly snapshots: Database<unknown, string>;
  /** Content-addressed blobs: digest → bytes. */
  readonly blobs: Database<Buffer, string>;
  /** Secondary indexes (runs by update time, parent → children, ...). */
  readonly index: Database<unknown, Key>;
  /** True once this handle was released: a write through it could land in a closed environment. */
  readonly closed: boolean;
  /** Releases this handle; the environment closes when its last handle does. */
  close(): Promise<void>;
}

interface OpenEnv {
  root: RootDatabase;
  snapshots: Database<unknown, string>;
  blobs: Database<Buffer, string>;
  index: Database<unknown, Key>;
  refs: number;
}

// One environment per path per process: LMDB forbids opening the same environment twice in
// one process, and every open costs a mmap.
const envs = new Map<string, OpenEnv>();

/** Opens (once per process, reference-counted) the LMDB environment at `<dataDir>/lmdb`. */
export function openLmdbStore(dataDir: string): LmdbStore {
  const path = resolve(join(dataDir, 'lmdb'));
  let env = envs.get(path);
  if (!env) {
    mkdirSync(path, { recursive: true });
    // defaults keep synced commits: a write promise plus `flushed` means it is on disk
    const root = open({ path, maxDbs: 8 });
    env = {
      root,
      snapshots: root.openDB<unknown, string>({ name: 'snapshots', encoding: 'json' }),
      blobs: root.openDB<Buffer, string>({ name: 'blobs', encoding: 'binary' }),
      index: root.openDB<unknown, Key>({ name: 'index' }),
      refs: 0,
    };
    envs.set(path, env);
  }
  env.refs++;
  const opened = env;
  let closed = false;
  return {
    path,
    root: opened.root,
    snapshots: opened.snapshots,
    blobs: opened.blobs,
    index: opened.index,
    get closed() {
      return closed;
    },
    async close() {
      if (closed) return;
      closed = true;
      if (--opened.refs > 0) return;
      envs.delete(path);
      await opened.root.close();
    },
  };
}

/** Waits until a write is committed and flushed to disk. */
export async function durable(write: Promise<unknown>, db: { flushed: Promise<boolean> }): Promise<void> {
  await write;
  await db.flushed;
}
